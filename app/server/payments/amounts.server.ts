import { getAddress } from "viem";
import { z } from "zod";

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
