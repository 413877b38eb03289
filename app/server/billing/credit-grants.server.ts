import { randomUUID } from "node:crypto";
import { z } from "zod";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";

// Credits an operator gives (the self-hosted way to pay for model calls, and goodwill on a
// paid server): one credit_ledger row each, reason `grant`, integer micro-USD, once per
// idempotency key. docs/decisions/0100-self-hosted-mode.md

/** At most 10 000 USD in one grant: a typo of a few zeros should not mint a fortune. */
export const MAX_GRANT_MICRO_USD = 10_000 * 1_000_000;

const grantInput = z.object({
  userId: z.string().min(1).max(64),
  microUsd: z.number().int().positive().max(MAX_GRANT_MICRO_USD),
  reason: z.string().trim().min(1).max(500),
  actor: z.string().min(1).max(200),
  idempotencyKey: z.string().min(1).max(200),
});

export interface CreditGrant {
  id: string;
  userId: string;
  microUsd: number;
  reason: string;
  grantedBy: string;
  createdAt: string;
  /** False when the key had been used: the grant was made before and is not repeated. */
  created: boolean;
}

/**
 * Adds `microUsd` to the user's credits. A second call with the same idempotency key returns
 * the first grant and adds nothing; the same key with another amount is 409 (a different grant
 * under a reused key is a caller's bug, not a retry).
 */
export async function grantCredits(
  userId: string,
  microUsd: number,
  reason: string,
  actor: string,
  idempotencyKey: string,
): Promise<CreditGrant> {
  const parsed = grantInput.safeParse({ userId, microUsd, reason, actor, idempotencyKey });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new DomainError(400, `${issue?.path.join(".")}: ${issue?.message}`);
  }
  const input = parsed.data;
  const reference = `grant:${input.idempotencyKey}`;
  const [user] = await db()`select id from users where id = ${input.userId}`;
  if (!user) throw notFound("User");
  const inserted = await db()<{ id: string; created_at: Date }[]>`
    insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference, granted_by, note)
    values (${`led_${randomUUID()}`}, ${input.userId}, ${input.microUsd}, 'grant', ${reference},
      ${input.actor}, ${input.reason})
    on conflict (user_id, reason, reference) do nothing
    returning id, created_at`;
  const [row] = inserted.length
    ? [{ ...inserted[0]!, amount: input.microUsd, note: input.reason, granted_by: input.actor }]
    : await db()<
        { id: string; created_at: Date; amount: number; note: string; granted_by: string }[]
      >`select id, created_at, amount_micro_usd::bigint as amount, note, granted_by
        from credit_ledger where user_id = ${input.userId} and reason = 'grant'
          and reference = ${reference}`;
  if (!row) throw new DomainError(409, "The grant could not be written; try again");
  if (Number(row.amount) !== input.microUsd) {
    throw new DomainError(409, "idempotencyKey: already used for a grant of another amount");
  }
  if (inserted.length > 0) {
    await recordAudit({
      action: "credits.changed",
      userId: input.userId,
      target: row.id,
      details: { reason: "grant", amountMicroUsd: input.microUsd, note: input.reason },
    });
  }
  return {
    id: row.id,
    userId: input.userId,
    microUsd: Number(row.amount),
    reason: row.note,
    grantedBy: row.granted_by,
    createdAt: row.created_at.toISOString(),
    created: inserted.length > 0,
  };
}
