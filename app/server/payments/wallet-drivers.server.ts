import type { Address, LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { seal, unseal } from "../platform/crypto.server.ts";
import { env } from "../platform/env.server.ts";

// Hosted wallets behind one interface. The built-in driver generates a key per owner and keeps
// it sealed (AES-256-GCM under SEALING_KEY); the key leaves this module only inside a viem
// account that signs, never as a value. A hosted-wallet service would be a second driver that
// keeps the service's wallet id in `externalRef` and signs through the service's API with
// viem's `toAccount` (docs/decisions/0125-hosted-wallets.md).

/** What a driver stores for a wallet (a row of hosted_wallets). */
export interface StoredWallet {
  driver: string;
  address: Address;
  sealedKey: string | null;
  externalRef: string | null;
}

export interface HostedWalletDriver {
  readonly name: string;
  /** Makes a new wallet; the caller stores what it returns. */
  create(ownerId: string): Promise<StoredWallet>;
  /** A viem account that signs for a stored wallet of this driver. */
  signer(wallet: StoredWallet): Promise<LocalAccount>;
}

const builtin: HostedWalletDriver = {
  name: "builtin",
  async create() {
    const key = generatePrivateKey();
    return {
      driver: "builtin",
      address: privateKeyToAccount(key).address,
      sealedKey: seal(key),
      externalRef: null,
    };
  },
  async signer(wallet) {
    if (!wallet.sealedKey) throw new Error("builtin wallet without a sealed key");
    const account = privateKeyToAccount(unseal(wallet.sealedKey) as `0x${string}`);
    if (account.address !== wallet.address) throw new Error("sealed key does not match address");
    return account;
  },
};

const drivers: Record<string, HostedWalletDriver> = { builtin };

/** The driver new wallets are made with (HOSTED_WALLET_DRIVER). */
export const activeDriver = (): HostedWalletDriver => drivers[env().HOSTED_WALLET_DRIVER]!;

/** The driver that made a stored wallet (a wallet keeps its driver when the setting changes). */
export function driverOf(wallet: StoredWallet): HostedWalletDriver {
  const driver = drivers[wallet.driver];
  if (!driver) throw new Error(`unknown hosted-wallet driver ${wallet.driver}`);
  return driver;
}
