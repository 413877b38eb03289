import { type Address, getAddress } from "viem";
import { z } from "zod";

// Ethereum addresses at the edge: 0x + 40 hex, any case, normalised to the EIP-55 checksum form.
// A mixed-case address is accepted even when its checksum is wrong (docs/decisions/0053).

export const ADDRESS_RE = /^0x[0-9a-fA-F]{40}$/;

export const checksum = (address: string): Address => getAddress(address.toLowerCase());

export const addressSchema = z
  .string()
  .regex(ADDRESS_RE, "must be an Ethereum address (0x followed by 40 hex characters)")
  .transform(checksum);
