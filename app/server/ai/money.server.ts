// Money arithmetic of the AI layer, exact: integers only.
//
// Prices are kept as micro-USD per million tokens, which is numerically the same as pico-USD
// (1e-12 USD) per token: $2.50 per 1M tokens = 2_500_000 = 2.5e-6 USD per token. A cost in
// pico-USD is then tokens × price with no division at all; it is converted once, rounded up, to
// the integer micro-USD that ledgers and usage rows hold.

export const PICO_PER_MICRO = 1_000_000n;
export const PICO_PER_USD = 1_000_000_000_000n;

function parseDecimal(value: string, scale: number): bigint {
  const text = value.trim();
  const match = /^(\d*)(?:\.(\d*))?$/.exec(text);
  if (!match || (match[1] === "" && (match[2] ?? "") === "")) {
    // Scientific notation and friends: go through a float, rounded to the unit.
    const n = Number(text);
    if (!Number.isFinite(n) || n < 0) throw new Error(`Not a non-negative price: ${value}`);
    return BigInt(Math.round(n * 10 ** scale));
  }
  const whole = match[1] || "0";
  const fraction = match[2] ?? "";
  const kept = fraction.slice(0, scale).padEnd(scale, "0");
  let result = BigInt(whole) * 10n ** BigInt(scale) + BigInt(kept || "0");
  // Round half up on the first dropped digit.
  if (fraction.length > scale && Number(fraction[scale]) >= 5) result += 1n;
  return result;
}

/** "2.50" USD per 1M tokens (how vendors publish prices) → 2_500_000 micro-USD per 1M tokens. */
export const usdPerMillionToPrice = (usd: string): bigint => parseDecimal(usd, 6);

/** "0.0000025" USD per token (OpenRouter's listing) → 2_500_000 micro-USD per 1M tokens. */
export const usdPerTokenToPrice = (usd: string): bigint => parseDecimal(usd, 12);

/** micro-USD per 1M tokens → USD per token, as the API shows prices (2_500_000 → 0.0000025). */
export const priceToUsdPerToken = (price: bigint): number => Number(price) / 1e12;

export interface Prices {
  prompt: bigint;
  completion: bigint;
}

/** Exact cost in pico-USD. */
export function costPico(prices: Prices, promptTokens: number, completionTokens: number): bigint {
  return BigInt(promptTokens) * prices.prompt + BigInt(completionTokens) * prices.completion;
}

/** Exact cost in integer micro-USD, rounded up to the next whole micro-USD. */
export function costMicroUsd(prices: Prices, promptTokens: number, completionTokens: number) {
  const pico = costPico(prices, promptTokens, completionTokens);
  return Number((pico + PICO_PER_MICRO - 1n) / PICO_PER_MICRO);
}

/** Cost in USD as a number (estimates): exact for any realistic figure. */
export function costUsd(prices: Prices, promptTokens: number, completionTokens: number): number {
  const pico = costPico(prices, promptTokens, completionTokens);
  const whole = pico / PICO_PER_USD;
  const rest = pico % PICO_PER_USD;
  return Number(`${whole}.${rest.toString().padStart(12, "0")}`);
}

/** Integer micro-USD → USD, at the edge (answers); sums stay in micro-USD until then. */
export const microToUsd = (micro: number): number => micro / 1_000_000;

export const usdToMicro = (usd: number): number => Math.round(usd * 1_000_000);

/** An estimate in USD; token counts need not be whole (exact arithmetic when they are). */
export function estimateUsd(prices: Prices, promptTokens: number, completionTokens: number) {
  if (Number.isInteger(promptTokens) && Number.isInteger(completionTokens)) {
    return costUsd(prices, promptTokens, completionTokens);
  }
  return (
    (promptTokens * Number(prices.prompt) + completionTokens * Number(prices.completion)) / 1e12
  );
}
