// Formatting shared by pages (server and browser).

/** £29, £4,999, £12.50 — the same on server and client (no locale data involved). */
export function formatGbp(pence: number): string {
  const pounds = Math.floor(pence / 100);
  const rest = pence % 100;
  const grouped = String(pounds).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `£${grouped}${rest ? `.${String(rest).padStart(2, "0")}` : ""}`;
}
