import type { Address } from "viem";
import { z } from "zod";
import { db } from "../platform/db.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";
import { newId } from "../platform/ids.server.ts";
import { addressSchema, amountSchema } from "./amounts.server.ts";
import { splitShares } from "./shares.server.ts";
import { paymentToken } from "./token.server.ts";
import {
  assertCanPay,
  payLeg,
  reconcileLeg,
  type Transfer,
  transfersOf,
  withSenderLock,
} from "./transfers.server.ts";
import { requireWallet } from "./wallets.server.ts";

// Instant royalty splits: a split is a list of recipients with basis points summing to 10000;
// an execution pays an amount from the owner's hosted wallet, one transfer per recipient, each
// recorded in the transfer ledger and confirmed from the chain. The execution id (given by the
// caller, else made here) makes it idempotent: a re-run pays only the legs not yet paid.
// docs/decisions/0126-instant-splits.md

export const recipientsSchema = z
  .array(z.object({ address: addressSchema, bps: z.number().int().min(1).max(10_000) }).strict())
  .min(1)
  .max(50)
  .refine((rs) => rs.reduce((sum, r) => sum + r.bps, 0) === 10_000, "bps must sum to 10000")
  .refine(
    (rs) => new Set(rs.map((r) => r.address)).size === rs.length,
    "each address may appear once",
  );

export const defineSplitSchema = z
  .object({
    action: z.literal("define"),
    name: z.string().trim().min(1).max(100),
    recipients: recipientsSchema,
  })
  .strict();

export const executionIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, "must be 1–64 letters, digits, '.', '_' or '-'");

export const executeSplitSchema = z
  .object({
    action: z.literal("execute"),
    splitId: z.string().min(1).max(64),
    amount: amountSchema,
    executionId: executionIdSchema.optional(),
  })
  .strict();

type Recipient = { address: Address; bps: number };

interface SplitRow {
  id: string;
  name: string;
  recipients: Recipient[];
  created_at: Date;
}

const splitView = (r: SplitRow) => ({
  id: r.id,
  name: r.name,
  recipients: r.recipients,
  createdAt: r.created_at.toISOString(),
});

export async function defineSplit(userId: string, input: z.infer<typeof defineSplitSchema>) {
  const [row] = await db()<SplitRow[]>`
    insert into splits (id, user_id, name, recipients)
    values (${newId("spl")}, ${userId}, ${input.name}, ${db().json(input.recipients)})
    returning id, name, recipients, created_at`;
  return { split: splitView(row!) };
}

async function ownedSplit(userId: string, splitId: string): Promise<SplitRow> {
  const [row] = await db()<SplitRow[]>`
    select id, name, recipients, created_at from splits
    where id = ${splitId} and user_id = ${userId}`;
  if (!row) throw notFound("Split");
  return row;
}

const purposeOf = (userId: string, executionId: string) => `split:${userId}:${executionId}`;

interface ExecutionRow {
  id: string;
  split_id: string;
  amount: string;
  token: string;
  created_at: Date;
}

export type ExecutionStatus = "completed" | "pending" | "failed" | "created";

/** An execution as recorded: per recipient its share and every transfer attempt. */
async function executionView(userId: string, row: ExecutionRow) {
  const split = await ownedSplit(userId, row.split_id);
  const shares = splitShares(
    BigInt(row.amount),
    split.recipients.map((r) => r.bps),
  );
  const transfers = await transfersOf(purposeOf(userId, row.id));
  const legs = split.recipients.map((r, leg) => {
    const attempts = transfers.filter((t) => t.leg === leg);
    const last: Transfer | undefined = attempts.at(-1);
    const share = shares[leg]!;
    return {
      leg,
      address: r.address,
      bps: r.bps,
      amount: share.toString(),
      status: share === 0n ? ("confirmed" as const) : (last?.status ?? ("unpaid" as const)),
      hash: attempts.find((a) => a.status === "confirmed")?.hash ?? last?.hash ?? null,
      attempts,
    };
  });
  const paid = legs
    .filter((l) => l.status === "confirmed")
    .reduce((sum, l) => sum + BigInt(l.amount), 0n);
  const status: ExecutionStatus = legs.every((l) => l.status === "confirmed")
    ? "completed"
    : legs.some((l) => l.status === "pending")
      ? "pending"
      : legs.some((l) => l.status === "failed")
        ? "failed"
        : "created";
  return {
    id: row.id,
    splitId: row.split_id,
    amount: row.amount,
    token: row.token,
    status,
    paid: paid.toString(),
    remaining: (BigInt(row.amount) - paid).toString(),
    remainderRule: "first recipient",
    createdAt: row.created_at.toISOString(),
    legs,
  };
}

export async function getExecution(userId: string, executionId: string) {
  const [row] = await db()<ExecutionRow[]>`
    select id, split_id, amount, token, created_at from split_executions
    where user_id = ${userId} and id = ${executionId}`;
  if (!row) throw notFound("Execution");
  return { execution: await executionView(userId, row) };
}

export async function listSplits(userId: string) {
  const splits = await db()<SplitRow[]>`
    select id, name, recipients, created_at from splits
    where user_id = ${userId} order by created_at desc limit 100`;
  const executions = await db()<ExecutionRow[]>`
    select id, split_id, amount, token, created_at from split_executions
    where user_id = ${userId} order by created_at desc limit 20`;
  return {
    splits: splits.map(splitView),
    executions: await Promise.all(executions.map((e) => executionView(userId, e))),
  };
}

/**
 * Pays a split: refuses (400) before sending anything when the wallet lacks the token or the gas
 * for what is still unpaid, then pays leg after leg and stops at the first that does not
 * confirm. The answer is the execution as recorded; a leg that failed answers 502 with it.
 */
export async function executeSplit(userId: string, input: z.infer<typeof executeSplitSchema>) {
  const split = await ownedSplit(userId, input.splitId);
  const wallet = await requireWallet(userId);
  const token = await paymentToken();
  const executionId = input.executionId ?? newId("exe");
  const purpose = purposeOf(userId, executionId);
  const shares = splitShares(
    input.amount,
    split.recipients.map((r) => r.bps),
  );

  return withSenderLock(wallet.address, async () => {
    const [existing] = await db()<ExecutionRow[]>`
      select id, split_id, amount, token, created_at from split_executions
      where user_id = ${userId} and id = ${executionId}`;
    if (existing && (existing.split_id !== split.id || BigInt(existing.amount) !== input.amount)) {
      throw new DomainError(409, "This executionId was used for another split or amount");
    }
    const legs = split.recipients.map((r, leg) => ({
      purpose,
      leg,
      fromOwner: userId,
      to: r.address,
      amount: shares[leg]!,
    }));
    const missing = [];
    for (const leg of legs) {
      if (leg.amount === 0n) continue;
      if ((await reconcileLeg(purpose, leg.leg)) === "unpaid") missing.push(leg);
    }
    await assertCanPay(userId, missing);
    if (!existing) {
      await db()`insert into split_executions (user_id, id, split_id, amount, token)
        values (${userId}, ${executionId}, ${split.id}, ${input.amount.toString()}, ${token.address})`;
    }
    for (const leg of missing) {
      const status = await payLeg(leg);
      if (status !== "confirmed") break;
    }
    const { execution } = await getExecution(userId, executionId);
    if (execution.status === "failed") {
      const failed = execution.legs.find((l) => l.status === "failed")!;
      throw new DomainError(
        502,
        `The transfer to ${failed.address} failed (${failed.attempts.at(-1)?.error}); ${execution.paid} of ${execution.amount} is paid. Re-run with the same executionId to pay what is missing.`,
        { execution },
      );
    }
    return { execution };
  });
}
