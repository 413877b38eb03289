import type { LoaderFunctionArgs } from "@remix-run/node";
import { Form, Link, useLoaderData, useSearchParams } from "@remix-run/react";
import { z } from "zod";
import { AuditTable } from "../components/audit-table.tsx";
import { Card } from "../components/forms.tsx";
import { ActionButton, OpsNotices, usd } from "../components/ops.tsx";
import { OpsStorageCard } from "../components/ops-storage.tsx";
import { extraSeatsSchema } from "../schemas/organisations.ts";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";
import { opsStorageOfUser, setStorageLimitAsOperator } from "../server/ops/storage.server.ts";
import {
  assignPlanAsOperator,
  deleteUserAsOperator,
  grantCreditsAsOperator,
  opsUserDetail,
  setOperator,
  setOrganisationSeatsAsOperator,
  suspendUser,
  unsuspendUser,
} from "../server/ops/users.server.ts";
import { SELF_HOSTED_PLANS } from "../server/platform/env.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

export async function loader({ request, params }: LoaderFunctionArgs) {
  await requireOperator(request);
  try {
    const userId = params.id ?? "";
    const detail = await opsUserDetail(userId);
    return {
      ...detail,
      storage: await opsStorageOfUser(userId),
      plans: [...SELF_HOSTED_PLANS, "default"],
    };
  } catch (error) {
    if (error instanceof DomainError && error.status === 404) {
      throw new Response("User not found", { status: 404 });
    }
    throw error;
  }
}

const userActions = z.discriminatedUnion("intent", [
  z.object({ intent: z.literal("suspend"), reason: z.string().trim().max(500).default("") }),
  z.object({ intent: z.literal("unsuspend") }),
  z.object({ intent: z.literal("grant-operator") }),
  z.object({ intent: z.literal("revoke-operator") }),
  z.object({ intent: z.literal("delete"), confirm: z.literal("yes") }),
  extraSeatsSchema.extend({ intent: z.literal("set-seats") }),
  z.object({
    intent: z.literal("set-storage"),
    // Empty: back to the plan's limit; else GB, decimals allowed (a small test install).
    gigabytes: z.preprocess(
      (v) => (v === "" || v === undefined ? null : v),
      z.coerce.number().positive().max(100_000).nullable(),
    ),
  }),
  z.object({ intent: z.literal("assign-plan"), plan: z.enum([...SELF_HOSTED_PLANS, "default"]) }),
  z.object({
    intent: z.literal("grant-credits"),
    amount: z.string().trim().min(1).max(20),
    reason: z.string().trim().min(1).max(500),
    idempotencyKey: z.uuid(),
  }),
]);

export const action = opsAction({
  schema: userActions,
  handler: async (value, { operator, params }) => {
    const userId = params.id ?? "";
    const back = (notice: string) => `/ops/users/${userId}?notice=${encodeURIComponent(notice)}`;
    switch (value.intent) {
      case "suspend":
        await suspendUser(operator.id, userId, value.reason);
        return back("Suspended: sessions ended, keys refused, agents stopping.");
      case "unsuspend":
        await unsuspendUser(userId);
        return back("Suspension lifted.");
      case "grant-operator":
        await setOperator(operator.id, userId, true);
        return back("Operator role granted.");
      case "revoke-operator":
        await setOperator(operator.id, userId, false);
        return back("Operator role revoked.");
      case "assign-plan": {
        const assigned = await assignPlanAsOperator(operator.id, userId, value.plan);
        return back(`Plan: ${assigned.plan} (was ${assigned.previous}).`);
      }
      case "grant-credits": {
        const grant = await grantCreditsAsOperator(operator.id, userId, value);
        return back(
          grant.created ? `Granted ${usd(grant.microUsd)}.` : "That grant was made already.",
        );
      }
      case "set-storage":
        await setStorageLimitAsOperator(operator.id, userId, value.gigabytes);
        return back(
          value.gigabytes === null
            ? "Storage: the plan's limit."
            : `Storage: ${value.gigabytes} GB.`,
        );
      case "set-seats":
        await setOrganisationSeatsAsOperator(operator.id, userId, value.seats);
        return back(`Extra seats: ${value.seats}.`);
      case "delete":
        await deleteUserAsOperator(operator.id, userId);
        return `/ops/users?notice=${encodeURIComponent("Account deleted.")}`;
    }
  },
});

export default function OpsUser() {
  const page = useLoaderData<typeof loader>();
  const [params] = useSearchParams();
  const { user } = page;
  return (
    <div className="space-y-6">
      <OpsNotices />
      <Card title={user.email}>
        <dl className="grid grid-cols-2 gap-1 text-sm" data-testid="ops-user">
          <dt>Id</dt>
          <dd>
            <code>{user.id}</code>
          </dd>
          <dt>Name</dt>
          <dd>{user.name}</dd>
          <dt>Plan</dt>
          <dd>{user.plan}</dd>
          <dt>Credits</dt>
          <dd>{page.credits.toFixed(2)}</dd>
          <dt>Agents</dt>
          <dd>{page.agents}</dd>
          <dt>Instance</dt>
          <dd>
            {page.instance
              ? `${page.instance.id} (${page.instance.observedState}, wants ${page.instance.desiredState})`
              : "—"}
          </dd>
          <dt>Role</dt>
          <dd>
            {user.isOperator ? "operator" : "user"}
            {user.operatorFromEnv ? " (OPERATOR_EMAILS)" : ""}
          </dd>
          <dt>State</dt>
          <dd>{user.suspendedAt ? `suspended since ${user.suspendedAt}` : "active"}</dd>
        </dl>
        <div className="flex flex-wrap items-center gap-3">
          {user.suspended ? (
            <ActionButton intent="unsuspend">Lift suspension</ActionButton>
          ) : (
            <Form method="post" className="flex gap-2">
              <input type="hidden" name="intent" value="suspend" />
              <input
                name="reason"
                placeholder="reason"
                aria-label="Reason"
                className="rounded border border-slate-300 px-2 py-0.5 text-xs"
              />
              <button
                type="submit"
                className="rounded border border-red-300 bg-white px-2 py-0.5 text-xs text-red-700"
              >
                Suspend
              </button>
            </Form>
          )}
          {user.isOperator && !user.operatorFromEnv ? (
            <ActionButton intent="revoke-operator">Revoke operator</ActionButton>
          ) : !user.isOperator ? (
            <ActionButton intent="grant-operator">Make operator</ActionButton>
          ) : null}
          {params.get("confirm") === "delete" ? (
            <span className="flex items-center gap-2 text-xs">
              Delete this account and its agents for good?
              <ActionButton intent="delete" fields={{ confirm: "yes" }} tone="danger">
                Yes, delete
              </ActionButton>
              <Link to={`/ops/users/${user.id}`} className="underline">
                Cancel
              </Link>
            </span>
          ) : (
            <Link to="?confirm=delete" className="text-xs text-red-700 underline">
              Delete account…
            </Link>
          )}
        </div>
      </Card>
      {page.seats ? (
        <Card title="Seats">
          <p className="text-sm">
            {page.seats.used} taken and {page.seats.pending} invited of{" "}
            {page.seats.limit === null ? "unlimited" : page.seats.limit} (the plan's{" "}
            {page.seats.fromPlan === null ? "unlimited" : page.seats.fromPlan}, {page.seats.extra}{" "}
            extra).
          </p>
          <Form method="post" className="flex items-center gap-2 text-sm">
            <input type="hidden" name="intent" value="set-seats" />
            <label htmlFor="seats">Extra seats</label>
            <input
              id="seats"
              name="seats"
              inputMode="numeric"
              defaultValue={page.seats.extra}
              required
              className="w-24 rounded border px-2 py-0.5"
            />
            <button type="submit" className="rounded border border-slate-300 px-2 py-0.5 text-xs">
              Set
            </button>
          </Form>
        </Card>
      ) : null}
      <Card title="Plan and credits">
        <p className="text-sm">
          Operator plan: <strong>{page.assignedPlan.plan}</strong> ({page.assignedPlan.source}
          {page.assignedPlan.assignedBy ? `, by ${page.assignedPlan.assignedBy}` : ""})
        </p>
        <Form method="post" className="flex items-center gap-2 text-sm">
          <input type="hidden" name="intent" value="assign-plan" />
          <label htmlFor="plan">Assign plan</label>
          <select
            id="plan"
            name="plan"
            defaultValue={page.assignedPlan.plan}
            className="rounded border px-2 py-0.5"
          >
            {page.plans.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
          <button type="submit" className="rounded border border-slate-300 px-2 py-0.5 text-xs">
            Assign
          </button>
        </Form>
        <Form method="post" className="flex flex-wrap items-center gap-2 text-sm">
          <input type="hidden" name="intent" value="grant-credits" />
          <input type="hidden" name="idempotencyKey" value={page.grantKey} />
          <label htmlFor="amount">Grant USD</label>
          <input
            id="amount"
            name="amount"
            inputMode="decimal"
            required
            className="w-24 rounded border px-2 py-0.5"
          />
          <input
            name="reason"
            placeholder="reason"
            aria-label="Reason for the grant"
            required
            className="rounded border px-2 py-0.5"
          />
          <button type="submit" className="rounded border border-slate-300 px-2 py-0.5 text-xs">
            Grant credits
          </button>
        </Form>
      </Card>
      <OpsStorageCard storage={page.storage} />
      <Card title="Credit ledger">
        {page.ledger.length === 0 ? (
          <p className="text-sm text-slate-600">No entries.</p>
        ) : (
          <table className="w-full text-left text-sm">
            <tbody>
              {page.ledger.map((l) => (
                <tr key={l.id} className="border-t border-slate-100">
                  <td>{l.createdAt.replace("T", " ").slice(0, 19)}</td>
                  <td>{usd(l.amountMicroUsd)}</td>
                  <td>{l.reason}</td>
                  <td>{l.reference ?? ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
      <Card title="Plan history">
        {page.billing.length === 0 ? (
          <p className="text-sm text-slate-600">No entries.</p>
        ) : (
          <ul className="text-sm">
            {page.billing.map((b) => (
              <li key={`${b.createdAt}-${b.kind}-${b.item}`}>
                {b.createdAt.slice(0, 19)} {b.kind} {b.item ?? ""} {b.fromStatus ?? ""} →{" "}
                {b.toStatus ?? ""} {b.detail ?? ""}
              </li>
            ))}
          </ul>
        )}
      </Card>
      <Card title="Audit log">
        <AuditTable entries={page.audit} />
      </Card>
    </div>
  );
}
