// Exact integer shares of an amount by basis points (summing to 10000): each recipient gets
// floor(amount × bps / 10000); the remainder (less than one unit per recipient) goes to the
// first listed recipient. docs/decisions/0126-instant-splits.md

export const TOTAL_BPS = 10_000n;

export function splitShares(amount: bigint, bps: readonly number[]): bigint[] {
  const shares = bps.map((b) => (amount * BigInt(b)) / TOTAL_BPS);
  const remainder = amount - shares.reduce((sum, s) => sum + s, 0n);
  if (shares.length > 0) shares[0]! += remainder;
  return shares;
}
