import {
  type Address,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  formatUnits,
  type Hex,
  http,
  keccak256,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
} from "viem";
import { chain, publicClient } from "../identity/chain.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { withSessionLock } from "../platform/session-lock.server.ts";
import { nativeBalance, onChain, paymentToken, tokenBalance } from "./token.server.ts";
import { requireWallet, walletSigner } from "./wallets.server.ts";

// The transfer ledger: every transfer (of the configured token, or of the native coin) is a row written before anything is signed, then
// given its hash and signed bytes before it is broadcast, then reconciled with the chain (the
// receipt decides confirmed or failed). A (purpose, leg) pays at most once: the partial unique
// index allows one attempt that is not failed, and a re-run reconciles that attempt before it
// makes another. One sender at a time per address (a PostgreSQL advisory lock) keeps nonces in
// order across web replicas. docs/decisions/0126-transfer-ledger.md

/** The `token` column of a native-coin transfer. */
export const NATIVE = "native";

export type TransferStatus = "pending" | "confirmed" | "failed";

export interface Leg {
  /** What the transfer pays: split:<user>:<execution>, booking:<id>:fund, … */
  purpose: string;
  leg: number;
  fromOwner: string;
  to: Address;
  amount: bigint;
  /** What moves: the configured token (the default) or the chain's native coin. */
  asset?: "token" | "native";
  /**
   * The call to make on the token contract, when it is not the sender's own ERC-20 `transfer`
   * of `amount` to `to` (an x402 settlement submits the payer's `transferWithAuthorization`).
   */
  call?: Hex;
}

interface TransferRow {
  id: string;
  purpose: string;
  leg: number;
  attempt: number;
  from_address: string;
  to_address: string;
  amount: string;
  status: TransferStatus;
  nonce: string | null;
  tx_hash: string | null;
  raw_tx: string | null;
  block_number: string | null;
  error: string | null;
  created_at: Date;
}

export interface Transfer {
  leg: number;
  attempt: number;
  from: string;
  to: string;
  amount: string;
  status: TransferStatus;
  hash: string | null;
  blockNumber: string | null;
  error: string | null;
  createdAt: string;
}

const view = (r: TransferRow): Transfer => ({
  leg: r.leg,
  attempt: r.attempt,
  from: r.from_address,
  to: r.to_address,
  amount: r.amount,
  status: r.status,
  hash: r.tx_hash,
  blockNumber: r.block_number,
  error: r.error,
  createdAt: r.created_at.toISOString(),
});

/** Every attempt recorded for a purpose, by leg and attempt. */
export async function transfersOf(purpose: string): Promise<Transfer[]> {
  const rows = await db()<TransferRow[]>`
    select * from payment_transfers where purpose = ${purpose} order by leg, attempt`;
  return rows.map(view);
}

/** Runs `fn` holding the sender lock of `address` (a session advisory lock: session-lock.server.ts). */
export function withSenderLock<T>(address: string, fn: () => Promise<T>): Promise<T> {
  return withSessionLock({ hashtextextended: `sender:${address}` }, fn);
}

async function mark(
  id: string,
  status: TransferStatus,
  fields: { error?: string; blockNumber?: bigint } = {},
): Promise<void> {
  await db()`update payment_transfers
    set status = ${status}, error = ${fields.error ?? null},
        block_number = ${fields.blockNumber?.toString() ?? null}, updated_at = now()
    where id = ${id}`;
}

/** Waits for a sent transfer's receipt and records what the chain says (pending on timeout). */
async function settleFromChain(id: string, hash: Hex): Promise<TransferStatus> {
  try {
    const receipt = await publicClient().waitForTransactionReceipt({
      hash,
      timeout: env().PAYMENTS_CONFIRM_TIMEOUT_MS,
      pollingInterval: 200,
    });
    if (receipt.status === "success") {
      await mark(id, "confirmed", { blockNumber: receipt.blockNumber });
      return "confirmed";
    }
    await mark(id, "failed", { error: "reverted on chain", blockNumber: receipt.blockNumber });
    return "failed";
  } catch (error) {
    logger().warn({ err: error, hash }, "no receipt yet; the transfer stays pending");
    return "pending";
  }
}

/**
 * Brings a pending attempt up to date with the chain: a receipt decides; a transaction the node
 * does not know is broadcast again from its signed bytes while its nonce is unused, and failed
 * when another transaction took that nonce; an attempt that was never signed is failed.
 */
async function reconcile(row: TransferRow): Promise<TransferStatus> {
  if (!row.tx_hash || !row.raw_tx) {
    // The hash is stored before broadcast: without one nothing left this process.
    await mark(row.id, "failed", { error: "never signed or sent" });
    return "failed";
  }
  const hash = row.tx_hash as Hex;
  const client = publicClient();
  const receipt = () =>
    absentOr("receipt", TransactionReceiptNotFoundError, () =>
      client.getTransactionReceipt({ hash }),
    );
  if (await receipt()) return settleFromChain(row.id, hash);
  const known = await absentOr("transaction", TransactionNotFoundError, () =>
    client.getTransaction({ hash }),
  );
  if (!known) {
    const used = await onChain("nonce", () =>
      client.getTransactionCount({ address: row.from_address as Address, blockTag: "latest" }),
    );
    if (used > Number(row.nonce)) {
      // Ours may have been mined between the lookups: ask once more before failing it.
      if (await receipt()) return settleFromChain(row.id, hash);
      await mark(row.id, "failed", { error: "nonce taken by another transaction" });
      return "failed";
    }
    try {
      await client.sendRawTransaction({ serializedTransaction: row.raw_tx as Hex });
    } catch (error) {
      // Unknown to the node and refused again: failing it is safe, because the next attempt
      // gets the same nonce, so at most one of the two can ever be mined.
      await mark(row.id, "failed", { error: `re-broadcast refused: ${shortReason(error)}` });
      return "failed";
    }
  }
  return settleFromChain(row.id, hash);
}

/**
 * A chain lookup where only a definite "not found" means absent: an RPC error is never read as
 * absence (that would fail a transfer that may be mined), it is a 502.
 */
async function absentOr<T>(
  what: string,
  notFound: new (...args: never[]) => Error,
  read: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof notFound) return undefined;
    return onChain(what, () => Promise.reject(error));
  }
}

/**
 * The leg's standing after reconciling its live attempt with the chain: confirmed, pending, or
 * `unpaid` (never tried, or every attempt failed). Call it holding the sender lock.
 */
export async function reconcileLeg(
  purpose: string,
  leg: number,
): Promise<"confirmed" | "pending" | "unpaid"> {
  const [live] = await db()<TransferRow[]>`
    select * from payment_transfers
    where purpose = ${purpose} and leg = ${leg} and status <> 'failed'`;
  if (!live) return "unpaid";
  if (live.status === "confirmed") return "confirmed";
  const status = await reconcile(live);
  return status === "failed" ? "unpaid" : status;
}

/**
 * Pays one leg at most once: returns its confirmed attempt, reconciles a pending one, or records
 * and sends a new attempt. Call it holding the sender lock of the leg's wallet.
 */
export async function payLeg(leg: Leg): Promise<TransferStatus> {
  const attempts = await db()<TransferRow[]>`
    select * from payment_transfers where purpose = ${leg.purpose} and leg = ${leg.leg}
    order by attempt`;
  const live = attempts.find((a) => a.status !== "failed");
  if (live?.status === "confirmed") return "confirmed";
  if (live) {
    const status = await reconcile(live);
    if (status !== "failed") return status;
  }
  const wallet = await requireWallet(leg.fromOwner);
  const native = leg.asset === "native";
  const token = native ? undefined : await paymentToken();
  const [row] = await db()<TransferRow[]>`
    insert into payment_transfers
      (purpose, leg, attempt, from_owner, from_address, to_address, token, amount)
    values (${leg.purpose}, ${leg.leg}, ${attempts.length + 1}, ${leg.fromOwner},
            ${wallet.address}, ${leg.to}, ${token?.address ?? NATIVE}, ${leg.amount.toString()})
    returning *`;
  const id = row!.id;
  let hash: Hex;
  let raw: Hex;
  try {
    const account = await walletSigner(leg.fromOwner);
    const client = createWalletClient({
      account,
      chain: chain(),
      transport: http(env().BASE_RPC_URL, { retryCount: 1, timeout: 10_000 }),
    });
    const nonce = await publicClient().getTransactionCount({
      address: wallet.address,
      blockTag: "pending",
    });
    const request = await client.prepareTransactionRequest(
      token
        ? {
            to: token.address,
            data:
              leg.call ??
              encodeFunctionData({
                abi: erc20Abi,
                functionName: "transfer",
                args: [leg.to, leg.amount],
              }),
            nonce,
          }
        : { to: leg.to, value: leg.amount, nonce },
    );
    raw = await client.signTransaction(request);
    hash = keccak256(raw);
    await db()`update payment_transfers
      set nonce = ${nonce}, tx_hash = ${hash}, raw_tx = ${raw}, updated_at = now()
      where id = ${id}`;
  } catch (error) {
    // Nothing was broadcast: the simulation reverted or the RPC failed before signing.
    logger().warn({ err: error, purpose: leg.purpose, leg: leg.leg }, "transfer not sent");
    await mark(id, "failed", { error: shortReason(error) });
    return "failed";
  }
  try {
    await publicClient().sendRawTransaction({ serializedTransaction: raw });
  } catch (error) {
    // The node may still have taken it: let the chain decide.
    logger().warn({ err: error, hash }, "broadcast failed; reconciling");
    const [current] = await db()<TransferRow[]>`select * from payment_transfers where id = ${id}`;
    return reconcile(current!).catch(() => "pending" as const);
  }
  return settleFromChain(id, hash);
}

export function shortReason(error: unknown): string {
  const e = error as { shortMessage?: string; message?: string };
  return (e.shortMessage ?? e.message ?? "unknown error").slice(0, 300);
}

/**
 * Refuses (400) before anything is sent when the wallet cannot pay every leg: token balance for
 * the sum, native coin for the gas of each transfer at the current fee.
 */
export async function assertCanPay(fromOwner: string, legs: { to: Address; amount: bigint }[]) {
  if (legs.length === 0) return;
  const wallet = await requireWallet(fromOwner);
  const token = await paymentToken();
  const need = legs.reduce((sum, l) => sum + l.amount, 0n);
  const have = await tokenBalance(wallet.address);
  if (have < need) {
    throw new DomainError(
      400,
      `Insufficient ${token.symbol} balance: the wallet holds ${have} and needs ${need} (smallest units)`,
      { balance: have.toString(), required: need.toString() },
    );
  }
  const client = publicClient();
  const first = legs[0]!;
  let gas: bigint;
  try {
    gas = await client.estimateContractGas({
      address: token.address,
      abi: erc20Abi,
      functionName: "transfer",
      args: [first.to, first.amount],
      account: wallet.address,
    });
  } catch (error) {
    throw new DomainError(400, `The transfer would fail: ${shortReason(error)}`);
  }
  const fees = await onChain("gas price", () => client.estimateFeesPerGas());
  const perGas = fees.maxFeePerGas ?? fees.gasPrice ?? 0n;
  const gasNeed = gas * perGas * BigInt(legs.length);
  const native = await nativeBalance(wallet.address);
  if (native < gasNeed) {
    throw new DomainError(
      400,
      `Insufficient ${client.chain?.nativeCurrency.symbol ?? "ETH"} for gas: the wallet holds ${formatUnits(native, 18)} and needs about ${formatUnits(gasNeed, 18)}`,
      { nativeBalance: native.toString(), gasRequired: gasNeed.toString() },
    );
  }
}
