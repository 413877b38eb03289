import { type Address, erc20Abi, getAddress } from "viem";
import { publicClient } from "../identity/chain.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";

// The configured stablecoin (PAYMENTS_TOKEN_ADDRESS, USDC on Base by default) and balances.
// Amounts are bigints in the smallest unit; JSON carries them as decimal strings.

export interface TokenInfo {
  address: Address;
  symbol: string;
  decimals: number;
}

let cached: { key: string; info: TokenInfo } | undefined;

/** Reads a chain call; an unreachable RPC or a missing contract is 502, not a 500. */
export async function onChain<T>(what: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    logger().warn({ err: error, what }, "chain read failed");
    throw new DomainError(502, `The blockchain could not be read (${what})`);
  }
}

export async function paymentToken(): Promise<TokenInfo> {
  const address = getAddress(env().PAYMENTS_TOKEN_ADDRESS);
  const key = `${env().BASE_RPC_URL}|${address}`;
  if (cached?.key === key) return cached.info;
  const client = publicClient();
  const [symbol, decimals] = await onChain("token metadata", () =>
    Promise.all([
      client.readContract({ address, abi: erc20Abi, functionName: "symbol" }),
      client.readContract({ address, abi: erc20Abi, functionName: "decimals" }),
    ]),
  );
  const info = { address, symbol, decimals };
  cached = { key, info };
  return info;
}

export interface Balances {
  native: { symbol: string; decimals: number; amount: string };
  token: TokenInfo & { amount: string };
}

export async function tokenBalance(holder: Address): Promise<bigint> {
  const { address } = await paymentToken();
  return onChain("token balance", () =>
    publicClient().readContract({
      address,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [holder],
    }),
  );
}

export const nativeBalance = (holder: Address): Promise<bigint> =>
  onChain("native balance", () => publicClient().getBalance({ address: holder }));

export async function balancesOf(holder: Address): Promise<Balances> {
  const [token, tokenAmount, native] = await Promise.all([
    paymentToken(),
    tokenBalance(holder),
    nativeBalance(holder),
  ]);
  const currency = publicClient().chain?.nativeCurrency;
  return {
    native: {
      symbol: currency?.symbol ?? "ETH",
      decimals: currency?.decimals ?? 18,
      amount: native.toString(),
    },
    token: { ...token, amount: tokenAmount.toString() },
  };
}
