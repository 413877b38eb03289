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
