// Formatting shared by pages (server and browser).

/** £29, £4,999, £12.50 — the same on server and client (no locale data involved). */
export function formatGbp(pence: number): string {
  const pounds = Math.floor(pence / 100);
  const rest = pence % 100;
  const grouped = String(pounds).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `£${grouped}${rest ? `.${String(rest).padStart(2, "0")}` : ""}`;
}

const grouped = (digits: string) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");

/** 1234567 → "1,234,567" (no locale data, so server and browser agree). */
export function formatCount(n: number): string {
  return `${n < 0 ? "-" : ""}${grouped(String(Math.abs(Math.trunc(n))))}`;
}

/**
 * Integer micro-USD → "$1,234.5679": whole numbers only (no float on the way), rounded half up to
 * `decimals` (0–6) places.
 */
export function formatMicroUsd(micro: number, decimals = 4): string {
  const sign = micro < 0 ? "-" : "";
  const step = 10 ** (6 - decimals);
  const rounded = Math.floor((Math.abs(Math.trunc(micro)) + step / 2) / step);
  const scale = 10 ** decimals;
  const whole = Math.floor(rounded / scale);
  const fraction = decimals ? `.${String(rounded % scale).padStart(decimals, "0")}` : "";
  return `${sign}$${grouped(String(whole))}${fraction}`;
}
