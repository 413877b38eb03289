import { getAddress } from "viem";
import { z } from "zod";
import { DomainError } from "../platform/errors.server.ts";

// Money at the edge: an amount is a positive integer in the token's smallest unit, sent as a
// decimal string (a JSON number would lose digits above 2^53); addresses are 0x + 40 hex and
// come back checksummed.

export const MAX_UINT256 = 2n ** 256n - 1n;

export const amountSchema = z
  .union([z.string(), z.number().int()])
  .transform(String)
  .pipe(z.string().regex(/^[1-9]\d{0,77}$/, "must be a positive integer in the smallest unit"))
  .transform((s) => BigInt(s))
  .refine((n) => n <= MAX_UINT256, "must fit in uint256");

export const addressSchema = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, "must be an Ethereum address (0x + 40 hex)")
  .transform((a) => getAddress(a));

/**
 * A decimal amount typed by a person ("1.5") in the smallest unit of an asset with `decimals`,
 * exactly: digits only (no float ever), refused when it has more decimals than the asset or is
 * zero. The error names the field, for the page's form.
 */
export function parseDecimalAmount(text: string, decimals: number, field = "amount"): bigint {
  const m = /^(\d{1,78})(?:\.(\d+))?$/.exec(text.trim());
  if (!m) throw new DomainError(400, `${field}: must be a number like 12 or 0.5`);
  const fraction = m[2] ?? "";
  if (fraction.length > decimals) {
    throw new DomainError(400, `${field}: has more than ${decimals} decimals`);
  }
  const units = BigInt(m[1]! + fraction.padEnd(decimals, "0"));
  if (units === 0n) throw new DomainError(400, `${field}: must be more than zero`);
  if (units > MAX_UINT256) throw new DomainError(400, `${field}: is too large`);
  return units;
}

/** The smallest-unit amount written with its decimals ("1500000", 6 → "1.5"). */
export function formatUnitsExact(units: bigint, decimals: number): string {
  const digits = units.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}
