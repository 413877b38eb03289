import type { Address, LocalAccount } from "viem";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { json } from "../platform/http.server.ts";
import { type Balances, balancesOf } from "./token.server.ts";
import { activeDriver, driverOf, type StoredWallet } from "./wallet-drivers.server.ts";

// Hosted wallets: one per owner (a user, or the platform's escrow). Creating twice returns the
// same wallet. Nothing here returns or logs a key. docs/decisions/0125-hosted-wallets.md

/** The owner id of the escrow wallet the platform controls (decision 0127). */
export const ESCROW_OWNER = "platform:escrow";

interface WalletRow {
  owner_id: string;
  driver: string;
  address: string;
  sealed_key: string | null;
  external_ref: string | null;
  created_at: Date;
}

export interface HostedWallet {
  address: Address;
  driver: string;
  chainId: number;
  createdAt: string;
}

const stored = (row: WalletRow): StoredWallet => ({
  driver: row.driver,
  address: row.address as Address,
  sealedKey: row.sealed_key,
  externalRef: row.external_ref,
});

const view = (row: WalletRow): HostedWallet => ({
  address: row.address as Address,
  driver: row.driver,
  chainId: env().BASE_CHAIN_ID,
  createdAt: row.created_at.toISOString(),
});

async function row(ownerId: string): Promise<WalletRow | undefined> {
  const [found] = await db()<WalletRow[]>`
    select owner_id, driver, address, sealed_key, external_ref, created_at
    from hosted_wallets where owner_id = ${ownerId}`;
  return found;
}

/** The owner's wallet, made on first call; `created` says whether this call made it. */
export async function ensureWallet(
  ownerId: string,
): Promise<{ wallet: HostedWallet; created: boolean }> {
  const existing = await row(ownerId);
  if (existing) return { wallet: view(existing), created: false };
  const made = await activeDriver().create(ownerId);
  // Two concurrent creates: one insert wins, the other reads the winner's wallet.
  const [inserted] = await db()<WalletRow[]>`
    insert into hosted_wallets (owner_id, driver, address, sealed_key, external_ref)
    values (${ownerId}, ${made.driver}, ${made.address}, ${made.sealedKey}, ${made.externalRef})
    on conflict (owner_id) do nothing
    returning owner_id, driver, address, sealed_key, external_ref, created_at`;
  if (inserted) return { wallet: view(inserted), created: true };
  return { wallet: view((await row(ownerId))!), created: false };
}

/** The owner's wallet, or undefined when none was made. */
export async function findWallet(ownerId: string): Promise<HostedWallet | undefined> {
  const found = await row(ownerId);
  return found ? view(found) : undefined;
}

export async function requireWallet(ownerId: string): Promise<HostedWallet> {
  const wallet = await findWallet(ownerId);
  if (!wallet) {
    throw new DomainError(404, "No hosted wallet yet: create one with POST /api/wallet/create");
  }
  return wallet;
}

/** A viem account signing for the owner's wallet (the key stays inside it). */
export async function walletSigner(ownerId: string): Promise<LocalAccount> {
  const found = await row(ownerId);
  if (!found) throw new DomainError(404, "No hosted wallet yet");
  return driverOf(stored(found)).signer(stored(found));
}

export interface WalletInfo {
  wallet: HostedWallet & { balances: Balances };
}

export async function walletInfo(ownerId: string): Promise<WalletInfo> {
  const wallet = await requireWallet(ownerId);
  return { wallet: { ...wallet, balances: await balancesOf(wallet.address) } };
}

/** GET /api/wallet/hosted: whether the user has a hosted wallet, and with which driver. */
export async function hostedStatus(ownerId: string) {
  const wallet = await findWallet(ownerId);
  return {
    hosted: Boolean(wallet),
    driver: wallet?.driver ?? env().HOSTED_WALLET_DRIVER,
    address: wallet?.address ?? null,
    chainId: env().BASE_CHAIN_ID,
  };
}

/** POST create: 201 with the new wallet, 200 with the existing one. */
export async function createWalletAnswer(ownerId: string): Promise<Response> {
  const { wallet, created } = await ensureWallet(ownerId);
  return json({ wallet, created }, { status: created ? 201 : 200 });
}
