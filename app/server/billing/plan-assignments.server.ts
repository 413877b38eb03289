import { z } from "zod";
import { credentialCache } from "../accounts/credential-cache.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env, SELF_HOSTED_PLANS } from "../platform/env.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";
import { stripeConfigured } from "./stripe.server.ts";

// Plans that operators give instead of a payment processor selling them. A server without
// STRIPE_SECRET_KEY is in self-hosted mode: every user without an assignment has DEFAULT_PLAN,
// computed when read (never written, so changing DEFAULT_PLAN changes it for everyone at once).
// An assignment (`plan_assignments`, written by assignPlan from the operator console) counts
// in both modes: an operator may also give a plan on a server that sells them.
// docs/decisions/0100-self-hosted-mode.md

export type AssignedPlan = (typeof SELF_HOSTED_PLANS)[number];

/** True when no payment processor is configured: operators, not checkout, give plans. */
export const selfHosted = (): boolean => !stripeConfigured();

/** The plan of users without an assignment (`none` with a payment processor). */
export const defaultPlan = (): AssignedPlan => (selfHosted() ? env().DEFAULT_PLAN : "none");

export interface OperatorPlan {
  /** A catalog plan id, or `none`. */
  plan: AssignedPlan;
  source: "assigned" | "default";
  assignedBy: string | null;
  assignedAt: string | null;
}

/** What operators give this user: their assignment, else the default plan. */
export async function operatorPlan(userId: string): Promise<OperatorPlan> {
  const [row] = await db()<{ plan: AssignedPlan; assigned_by: string; assigned_at: Date }[]>`
    select plan, assigned_by, assigned_at from plan_assignments where user_id = ${userId}`;
  if (row) {
    return {
      plan: row.plan,
      source: "assigned",
      assignedBy: row.assigned_by,
      assignedAt: row.assigned_at.toISOString(),
    };
  }
  return { plan: defaultPlan(), source: "default", assignedBy: null, assignedAt: null };
}

const assignInput = z.object({
  userId: z.string().min(1).max(64),
  /** `default` removes the assignment (back to DEFAULT_PLAN). */
  plan: z.enum([...SELF_HOSTED_PLANS, "default"]),
  actor: z.string().min(1).max(200),
});

/**
 * An operator sets a user's plan (`none` withholds every plan but a paid one; `default` goes
 * back to DEFAULT_PLAN). Written with a billing_ledger row naming the operator. Nothing running
 * is stopped by a lower plan: new agents are refused above its limit, as after a downgrade.
 */
export async function assignPlan(
  userId: string,
  plan: AssignedPlan | "default",
  actor: string,
): Promise<{ plan: AssignedPlan; previous: AssignedPlan; source: OperatorPlan["source"] }> {
  const input = assignInput.safeParse({ userId, plan, actor });
  if (!input.success) {
    throw new DomainError(400, `plan: one of ${[...SELF_HOSTED_PLANS, "default"].join(", ")}`);
  }
  const result = (await db().begin(async (t) => {
    const [user] = await t`select id from users where id = ${userId} for update`;
    if (!user) throw notFound("User");
    const [before] = await t<{ plan: AssignedPlan }[]>`
      select plan from plan_assignments where user_id = ${userId}`;
    const previous = before?.plan ?? defaultPlan();
    if (plan === "default") {
      await t`delete from plan_assignments where user_id = ${userId}`;
    } else {
      await t`
        insert into plan_assignments (user_id, plan, assigned_by) values (${userId}, ${plan}, ${actor})
        on conflict (user_id) do update
          set plan = excluded.plan, assigned_by = excluded.assigned_by, assigned_at = now()`;
    }
    const now = plan === "default" ? defaultPlan() : plan;
    await t`
      insert into billing_ledger (user_id, kind, item, from_status, to_status, detail, reference)
      values (${userId}, 'assignment', ${now}, ${previous}, ${now},
        ${plan === "default" ? `back to the default plan, by ${actor}` : `assigned by ${actor}`},
        ${`operator:${actor}`})`;
    await recordAudit(
      {
        action: "plan.changed",
        userId,
        target: userId,
        details: {
          fromItem: previous,
          item: now,
          source: plan === "default" ? "default" : "assigned",
        },
      },
      t,
    );
    return { plan: now, previous, source: plan === "default" ? "default" : "assigned" };
  })) as { plan: AssignedPlan; previous: AssignedPlan; source: OperatorPlan["source"] };
  // Credentials carry the assignment (the trigger tells other replicas); this one at once.
  credentialCache()?.forgetUser(userId);
  return result;
}
