import { type Chain, createPublicClient, defineChain, http, type PublicClient } from "viem";
import { base } from "viem/chains";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";

// The one EVM client: Base (or the configured chain id) over BASE_RPC_URL. Tests point it at
// anvil started with --chain-id 8453. docs/decisions/0050-chain-client.md

let cached: { key: string; client: PublicClient } | undefined;

export function chain(): Chain {
  const { BASE_CHAIN_ID, BASE_RPC_URL, CHAIN_NAME } = env();
  if (BASE_CHAIN_ID === base.id) {
    return { ...base, rpcUrls: { default: { http: [BASE_RPC_URL] } } };
  }
  return defineChain({
    id: BASE_CHAIN_ID,
    name: CHAIN_NAME,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [BASE_RPC_URL] } },
  });
}

export function publicClient(): PublicClient {
  const { BASE_CHAIN_ID, BASE_RPC_URL } = env();
  const key = `${BASE_CHAIN_ID}|${BASE_RPC_URL}`;
  if (cached?.key !== key) {
    cached = {
      key,
      client: createPublicClient({
        chain: chain(),
        // One retry for a transient blip; a dead RPC must fail fast, not after seconds.
        transport: http(BASE_RPC_URL, { retryCount: 1, retryDelay: 100, timeout: 10_000 }),
      }) as PublicClient,
    };
  }
  return cached.client;
}

/** The RPC URL safe to show: BASE_RPC_PUBLIC_URL, else BASE_RPC_URL's origin (no key leaks). */
export function publicRpcEndpoint(): string {
  const { BASE_RPC_PUBLIC_URL, BASE_RPC_URL } = env();
  return BASE_RPC_PUBLIC_URL ?? new URL(BASE_RPC_URL).origin;
}

/**
 * Throws 502 when the chain cannot be reached (or is the wrong chain). Signature checks call it
 * before trusting a `false`: without an RPC, viem reports an ERC-1271/6492 signature as invalid.
 */
export async function assertChainReachable(status = 502): Promise<void> {
  let id: number;
  try {
    id = await publicClient().getChainId();
  } catch (error) {
    logger().warn({ err: error }, "EVM RPC unreachable");
    throw new DomainError(status, "The blockchain RPC endpoint could not be reached");
  }
  if (id !== env().BASE_CHAIN_ID) {
    logger().error({ id, expected: env().BASE_CHAIN_ID }, "EVM RPC serves another chain");
    throw new DomainError(status, "The blockchain RPC endpoint serves another chain");
  }
}
