import { db } from "../platform/db.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";
import { randomAlphanumeric } from "../platform/ids.server.ts";
import { type AddOnId, AUDIT_RETENTION_DAYS, addOns, enterpriseSuite } from "./catalog.server.ts";
import { GRANTING_STATUSES } from "./subscriptions.server.ts";

// What each add-on gives (docs/decisions/0101-add-ons-sell-only-what-exists.md): one that is
// bought (`checkout`) is held through an active or trialing subscription of it or of the suite;
// one with nothing automatic behind it (`request`) is a service request that operators see and
// follow up, and never a charge.

const addOnIds = addOns.map((a) => a.id) as readonly string[];
const isAddOnId = (id: string): id is AddOnId => addOnIds.includes(id);

/** True when the user holds the add-on: its own subscription, or the suite, active or trialing. */
export async function hasAddon(userId: string, addon: AddOnId): Promise<boolean> {
  const [row] = await db()<{ ok: boolean }[]>`
    select exists (
      select 1 from subscriptions
      where user_id = ${userId}
        and ((kind = 'addon' and item = ${addon}) or (kind = 'suite' and item = ${enterpriseSuite.id}))
        and status = any(${GRANTING_STATUSES as unknown as string[]})
    ) as ok`;
  return row?.ok ?? false;
}

/** Every user holding the add-on (the audit purge keeps their entries longer). */
export async function usersWithAddon(addon: AddOnId): Promise<string[]> {
  const rows = await db()<{ user_id: string }[]>`
    select distinct user_id from subscriptions
    where ((kind = 'addon' and item = ${addon}) or (kind = 'suite' and item = ${enterpriseSuite.id}))
      and status = any(${GRANTING_STATUSES as unknown as string[]})`;
  return rows.map((r) => r.user_id);
}

/** How long the user's audit log is kept: a year with Audit Logs, else 90 days. */
export async function auditRetentionDays(userId: string): Promise<number> {
  return (await hasAddon(userId, "audit-logs"))
    ? AUDIT_RETENTION_DAYS.withAddOn
    : AUDIT_RETENTION_DAYS.base;
}

export const SERVICE_REQUEST_STATUSES = ["open", "in_progress", "done", "declined"] as const;
export type ServiceRequestStatus = (typeof SERVICE_REQUEST_STATUSES)[number];

export interface ServiceRequest {
  id: string;
  userId: string;
  addon: AddOnId;
  note: string | null;
  status: ServiceRequestStatus;
  createdAt: string;
  updatedAt: string;
}

interface RequestRow {
  id: string;
  user_id: string;
  addon: AddOnId;
  note: string | null;
  status: ServiceRequestStatus;
  created_at: Date;
  updated_at: Date;
}

const toRequest = (r: RequestRow): ServiceRequest => ({
  id: r.id,
  userId: r.user_id,
  addon: r.addon,
  note: r.note,
  status: r.status,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/**
 * The user asks for a `request` add-on. Asking again while one is open returns that request
 * (its note updated when a new one is given): one open request per user and add-on.
 */
export async function requestAddOn(
  userId: string,
  addon: string,
  note?: string,
): Promise<{ request: ServiceRequest; created: boolean }> {
  if (!isAddOnId(addon)) throw new DomainError(400, `addon: unknown add-on '${addon}'`);
  const item = addOns.find((a) => a.id === addon)!;
  if (item.fulfilment !== "request") {
    throw new DomainError(409, `${item.name} is bought, not requested: choose Subscribe`);
  }
  const text = note?.trim().slice(0, 1000) || null;
  const inserted = await db()<RequestRow[]>`
    insert into service_requests (id, user_id, addon, note)
    values (${`srq_${randomAlphanumeric(20)}`}, ${userId}, ${addon}, ${text})
    on conflict (user_id, addon) where status in ('open', 'in_progress') do nothing
    returning *`;
  if (inserted[0]) return { request: toRequest(inserted[0]), created: true };
  const [open] = await db()<RequestRow[]>`
    update service_requests set note = coalesce(${text}, note), updated_at = now()
    where user_id = ${userId} and addon = ${addon} and status in ('open', 'in_progress')
    returning *`;
  if (!open) throw new DomainError(409, "The request changed meanwhile; try again");
  return { request: toRequest(open), created: false };
}

/** The user's own requests, newest first. */
export async function listOwnServiceRequests(userId: string): Promise<ServiceRequest[]> {
  const rows = await db()<RequestRow[]>`
    select * from service_requests where user_id = ${userId} order by created_at desc, id`;
  return rows.map(toRequest);
}

/** For the operator console: requests in a status (default: the open ones), oldest first. */
export async function listServiceRequests(
  statuses: readonly ServiceRequestStatus[] = ["open", "in_progress"],
  limit = 100,
): Promise<ServiceRequest[]> {
  const rows = await db()<RequestRow[]>`
    select * from service_requests where status = any(${statuses as string[]})
    order by created_at, id limit ${limit}`;
  return rows.map(toRequest);
}

/** For the operator console: moves a request on. */
export async function setServiceRequestStatus(
  id: string,
  status: ServiceRequestStatus,
): Promise<ServiceRequest> {
  if (!SERVICE_REQUEST_STATUSES.includes(status)) {
    throw new DomainError(400, `status: one of ${SERVICE_REQUEST_STATUSES.join(", ")}`);
  }
  const [row] = await db()<RequestRow[]>`
    update service_requests set status = ${status}, updated_at = now()
    where id = ${id} returning *`;
  if (!row) throw notFound("Service request");
  return toRequest(row);
}
