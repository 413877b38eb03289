import { randomUUID } from "node:crypto";
import { type Address, erc20Abi, formatUnits, zeroAddress } from "viem";
import { z } from "zod";
import { publicClient } from "../identity/chain.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";
import {
  addressSchema,
  amountSchema,
  formatUnitsExact,
  parseDecimalAmount,
} from "./amounts.server.ts";
import { executionIdSchema } from "./splits.server.ts";
import { nativeBalance, onChain, paymentToken, tokenBalance } from "./token.server.ts";
import {
  NATIVE,
  payLeg,
  reconcileLeg,
  shortReason,
  type Transfer,
  transfersOf,
  withSenderLock,
} from "./transfers.server.ts";
import { requireWallet } from "./wallets.server.ts";

// Sending from a user's hosted wallet to an address: the native coin or the configured token,
// an integer amount in the smallest unit. Idempotent by the client's key: the send is one leg of
// the transfer ledger (purpose send:<user>:<key>), recorded before it is signed and reconciled
// with the chain after, so a retried request never pays twice. Refused (400) before anything
// is recorded when the wallet cannot cover the amount and the gas. Audited (`wallet.sent`).
// docs/decisions/0173-wallet-send.md

export const SEND_ASSETS = ["native", "token"] as const;
export type SendAsset = (typeof SEND_ASSETS)[number];

export const sendSchema = z
  .object({
    action: z.literal("send"),
    asset: z.enum(SEND_ASSETS),
    to: addressSchema,
    amount: amountSchema,
    idempotencyKey: executionIdSchema,
  })
  .strict();

export type SendInput = Omit<z.output<typeof sendSchema>, "action">;

interface SendRow {
  id: string;
  asset: SendAsset;
  token: string;
  to_address: string;
  amount: string;
  created_at: Date;
}

const purposeOf = (userId: string, key: string) => `send:${userId}:${key}`;

/** What a send stands at: the ledger's last attempt decides. */
function sendView(row: SendRow, attempts: Transfer[]) {
  const last = attempts.at(-1);
  return {
    id: row.id,
    asset: row.asset,
    token: row.token,
    to: row.to_address,
    amount: row.amount,
    status: last?.status ?? ("pending" as const),
    hash: attempts.find((a) => a.status === "confirmed")?.hash ?? last?.hash ?? null,
    attempts,
    createdAt: row.created_at.toISOString(),
  };
}
export type WalletSend = ReturnType<typeof sendView>;

export async function getSend(userId: string, key: string): Promise<{ send: WalletSend }> {
  const [row] = await db()<SendRow[]>`
    select id, asset, token, to_address, amount, created_at from wallet_sends
    where user_id = ${userId} and id = ${key}`;
  if (!row) throw notFound("Send");
  return { send: sendView(row, await transfersOf(purposeOf(userId, key))) };
}

/** The user's latest sends, newest first. */
export async function listSends(userId: string, limit = 20): Promise<WalletSend[]> {
  const rows = await db()<SendRow[]>`
    select id, asset, token, to_address, amount, created_at from wallet_sends
    where user_id = ${userId} order by created_at desc limit ${limit}`;
  return Promise.all(
    rows.map(async (r) => sendView(r, await transfersOf(purposeOf(userId, r.id)))),
  );
}

/**
 * 400 unless `from` holds the amount and the gas of one transfer at the current fee (for the
 * native coin both come out of the same balance). Reads only: nothing is recorded.
 */
export async function assertCanSend(from: Address, input: SendInput): Promise<void> {
  if (input.to === from) throw new DomainError(400, "to: is this wallet's own address");
  if (input.to === zeroAddress) throw new DomainError(400, "to: is the zero address");
  const client = publicClient();
  const symbol = client.chain?.nativeCurrency.symbol ?? "ETH";
  let gas: bigint;
  if (input.asset === "token") {
    const token = await paymentToken();
    const have = await tokenBalance(from);
    if (have < input.amount) {
      throw new DomainError(
        400,
        `Insufficient ${token.symbol} balance: the wallet holds ${have} and needs ${input.amount} (smallest units)`,
        { balance: have.toString(), required: input.amount.toString() },
      );
    }
    gas = await estimate(() =>
      client.estimateContractGas({
        address: token.address,
        abi: erc20Abi,
        functionName: "transfer",
        args: [input.to, input.amount],
        account: from,
      }),
    );
  } else {
    const have = await nativeBalance(from);
    if (have < input.amount) {
      throw new DomainError(
        400,
        `Insufficient ${symbol} balance: the wallet holds ${have} and needs ${input.amount} (smallest units)`,
        { balance: have.toString(), required: input.amount.toString() },
      );
    }
    gas = await estimate(() =>
      client.estimateGas({ account: from, to: input.to, value: input.amount }),
    );
  }
  const fees = await onChain("gas price", () => client.estimateFeesPerGas());
  const gasNeed = gas * (fees.maxFeePerGas ?? fees.gasPrice ?? 0n);
  const native = await nativeBalance(from);
  const nativeNeed = gasNeed + (input.asset === "native" ? input.amount : 0n);
  if (native < nativeNeed) {
    throw new DomainError(
      400,
      `Insufficient ${symbol} for gas: the wallet holds ${formatUnits(native, 18)} and needs about ${formatUnits(nativeNeed, 18)}`,
      { nativeBalance: native.toString(), gasRequired: gasNeed.toString() },
    );
  }
}

async function estimate(read: () => Promise<bigint>): Promise<bigint> {
  try {
    return await read();
  } catch (error) {
    throw new DomainError(400, `The transfer would fail: ${shortReason(error)}`);
  }
}

/**
 * Sends once per idempotency key: the same key with the same send answers what is recorded (a
 * pending transfer is reconciled with the chain first, a failed one is tried again); the same
 * key with another send is 409. A transfer the chain refused answers 502 with the record.
 */
export async function sendFromWallet(userId: string, input: SendInput) {
  const wallet = await requireWallet(userId);
  const token = input.asset === "token" ? (await paymentToken()).address : NATIVE;
  const purpose = purposeOf(userId, input.idempotencyKey);
  return withSenderLock(wallet.address, async () => {
    const [existing] = await db()<SendRow[]>`
      select id, asset, token, to_address, amount, created_at from wallet_sends
      where user_id = ${userId} and id = ${input.idempotencyKey}`;
    if (
      existing &&
      (existing.asset !== input.asset ||
        existing.token !== token ||
        existing.to_address !== input.to ||
        BigInt(existing.amount) !== input.amount)
    ) {
      throw new DomainError(409, "This idempotencyKey was used for another send");
    }
    if ((await reconcileLeg(purpose, 0)) === "unpaid") {
      await assertCanSend(wallet.address, input);
      if (!existing) {
        await db()`insert into wallet_sends (user_id, id, asset, token, to_address, amount)
          values (${userId}, ${input.idempotencyKey}, ${input.asset}, ${token}, ${input.to},
                  ${input.amount.toString()})`;
      }
      const status = await payLeg({
        purpose,
        leg: 0,
        fromOwner: userId,
        to: input.to,
        amount: input.amount,
        asset: input.asset,
      });
      await recordAudit({
        action: "wallet.sent",
        outcome: status === "failed" ? "failure" : "success",
        userId,
        target: input.to,
        details: {
          asset: input.asset,
          contract: token,
          amount: input.amount.toString(),
          idempotencyKey: input.idempotencyKey,
          status,
        },
      });
    }
    const { send } = await getSend(userId, input.idempotencyKey);
    if (send.status === "failed") {
      throw new DomainError(
        502,
        `The transfer failed (${send.attempts.at(-1)?.error}); nothing was paid. Send again with the same idempotencyKey to retry.`,
        { send },
      );
    }
    return { send };
  });
}

/** The asset's symbol and decimals (the native coin's from the chain, the token's from its contract). */
async function assetInfo(asset: SendAsset): Promise<{ symbol: string; decimals: number }> {
  if (asset === "token") return paymentToken();
  const currency = publicClient().chain?.nativeCurrency;
  return { symbol: currency?.symbol ?? "ETH", decimals: currency?.decimals ?? 18 };
}

/**
 * The wallet page's first step: the typed decimal amount in the smallest unit (exactly), the
 * same checks as the send, and a fresh idempotency key that the confirmation carries, so a
 * confirmation submitted twice sends once.
 */
export async function reviewSend(
  userId: string,
  input: { asset: SendAsset; to: Address; amount: string },
) {
  const wallet = await requireWallet(userId);
  const { symbol, decimals } = await assetInfo(input.asset);
  const amount = parseDecimalAmount(input.amount, decimals);
  const idempotencyKey = `snd_${randomUUID()}`;
  await assertCanSend(wallet.address, { asset: input.asset, to: input.to, amount, idempotencyKey });
  return {
    review: {
      asset: input.asset,
      to: input.to,
      amount: amount.toString(),
      shown: `${formatUnitsExact(amount, decimals)} ${symbol}`,
      idempotencyKey,
    },
  };
}
