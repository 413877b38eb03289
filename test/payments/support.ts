import type { ActionFunctionArgs } from "@remix-run/node";
import type { PaymentRequirements, SchemeNetworkClient } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { type Address, erc20Abi } from "viem";
import { afterAll, beforeAll } from "vitest";
import { ensureWallet } from "../../app/server/payments/wallets.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { type Anvil, startAnvil } from "../identity/anvil.ts";
import { deployFiatToken, type FiatToken, setNativeBalance } from "./fiat-token.ts";

// The payments tests' chain: one anvil per test file with Circle's FiatToken deployed on it and
// configured as the platform's token (PAYMENTS_TOKEN_ADDRESS), plus the reads and fundings the
// tests share. `setUpTestChain()` registers the file's beforeAll/afterAll; its fields are set
// once beforeAll ran.

export const ETH = 10n ** 18n;

export interface TestChain {
  anvil: Anvil;
  usdc: FiatToken;
  /** The token balance of an address, read from the chain. */
  balance(address: Address): Promise<bigint>;
  /** A hosted wallet for `userId` holding `tokens` units and `wei` of native coin. */
  fund(userId: string, tokens: bigint, wei?: bigint): Promise<Address>;
  setNative(address: Address, wei: bigint): Promise<void>;
}

export function setUpTestChain(env: Record<string, string> = {}): TestChain {
  const chain = {} as TestChain;
  beforeAll(async () => {
    const anvil = await startAnvil();
    const usdc = await deployFiatToken(anvil);
    process.env.PAYMENTS_TOKEN_ADDRESS = usdc.address;
    Object.assign(process.env, env);
    resetEnvCache();
    Object.assign(chain, {
      anvil,
      usdc,
      balance: (address: Address) =>
        anvil.client.readContract({
          address: usdc.address,
          abi: erc20Abi,
          functionName: "balanceOf",
          args: [address],
        }),
      setNative: (address: Address, wei: bigint) => setNativeBalance(anvil, address, wei),
      fund: async (userId: string, tokens: bigint, wei = ETH) => {
        const { wallet } = await ensureWallet(userId);
        if (tokens > 0n) await usdc.mint(wallet.address, tokens);
        await setNativeBalance(anvil, wallet.address, wei);
        return wallet.address;
      },
    } satisfies TestChain);
  });
  afterAll(async () => {
    await chain.anvil?.stop();
    delete process.env.PAYMENTS_TOKEN_ADDRESS;
    for (const key of Object.keys(env)) delete process.env[key];
    resetEnvCache();
  });
  return chain;
}

// --- x402 payers -------------------------------------------------------------------------

/** fetch that hands the request to a route module (no HTTP server), remembering what it sent. */
export function routeModuleFetch(
  route: { action: (args: ActionFunctionArgs) => Promise<unknown> },
  sent: Headers[],
  remoteAddress = "127.0.0.1",
): typeof fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    sent.push(new Headers(request.headers));
    return route.action({ request, params: {}, context: { remoteAddress } });
  }) as typeof fetch;
}

/** The x402 scheme client of anvil account `index`, signing `tamper`ed requirements if given. */
export function payingScheme(
  chain: TestChain,
  index: number,
  tamper?: (r: PaymentRequirements) => PaymentRequirements,
): SchemeNetworkClient {
  const inner = new ExactEvmScheme(chain.anvil.account(index));
  if (!tamper) return inner;
  return {
    scheme: inner.scheme,
    createPaymentPayload: (version, requirements, context) =>
      inner.createPaymentPayload(version, tamper(requirements), context),
  };
}

/** An @x402/fetch client paying with `scheme` over `fetchFn`. */
export function payingFetch(chain: TestChain, scheme: SchemeNetworkClient, fetchFn: typeof fetch) {
  // The test's token is not at Base's canonical USDC address, so the client allows it by name
  // (a client paying the default configuration needs no such entry).
  const client = new x402Client().register("eip155:*", scheme).setSpendControls({
    allowedAssets: [
      { network: "eip155:8453", asset: chain.usdc.address, maxAmountPerPayment: "1000000" },
    ],
  });
  return wrapFetchWithPayment(fetchFn, client);
}
