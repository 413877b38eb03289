import { type Address, erc20Abi } from "viem";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { checksum } from "./addresses.server.ts";
import { publicClient, publicRpcEndpoint } from "./chain.server.ts";

// Token gating: does an address hold at least GATING_MIN_BALANCE (an integer in the token's
// smallest unit) of the ERC-20 at GATING_TOKEN_ADDRESS? Only bigints are compared: no floating
// point anywhere. With no gating token configured gating is off and everyone has access.
// docs/decisions/0053-token-gating.md

export interface GatingCheck {
  address: Address;
  hasAccess: boolean;
  /** Whether a gating token is configured (false: everyone has access). */
  tokenGated: boolean;
  /** Decimal digits, smallest unit. */
  minBalance: string;
  /** The address's balance, decimal digits, smallest unit ("0" when gating is off). */
  balance: string;
  token: string;
  chain: string;
  contractAddress: string | null;
  rpcEndpoint: string;
}

export async function checkTokenGating(address: string): Promise<GatingCheck> {
  const e = env();
  const who = checksum(address);
  const common = {
    address: who,
    minBalance: e.GATING_MIN_BALANCE,
    token: e.GATING_TOKEN_SYMBOL,
    chain: e.CHAIN_NAME,
    rpcEndpoint: publicRpcEndpoint(),
  };
  if (!e.GATING_TOKEN_ADDRESS) {
    return { ...common, hasAccess: true, tokenGated: false, balance: "0", contractAddress: null };
  }
  const contractAddress = checksum(e.GATING_TOKEN_ADDRESS);
  let balance: bigint;
  try {
    balance = await publicClient().readContract({
      address: contractAddress,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [who],
    });
  } catch (error) {
    logger().warn({ err: error, contractAddress }, "token gating: balanceOf failed");
    throw new DomainError(500, "Could not read the token balance from the chain");
  }
  return {
    ...common,
    hasAccess: balance >= BigInt(e.GATING_MIN_BALANCE),
    tokenGated: true,
    balance: balance.toString(),
    contractAddress,
  };
}

/** The 403 a gated operation answers when the balance is short. */
export function gatingRefusal(check: GatingCheck): DomainError {
  return new DomainError(403, `Insufficient ${check.token} balance for access`, {
    required: `${check.minBalance} ${check.token} (smallest unit) on ${check.chain}`,
    minBalance: check.minBalance,
    balance: check.balance,
    token: check.token,
  });
}
