import { AsyncLocalStorage } from "node:async_hooks";
import type postgres from "postgres";
import { db } from "./db.server.ts";

// The audit log writer and reader (table audit_log, migration 0035): who did what to which
// account, from where, and whether it worked. Areas call `recordAudit`; the API route builder
// (and the page helpers) open an audit scope with the caller and the client IP, so a service
// only names the action. Never a secret: detail keys that name one are refused.
// docs/decisions/0102-audit-log.md

type Queryable = postgres.Sql | postgres.TransactionSql;

export const AUDIT_ACTIONS = [
  "auth.signin",
  "auth.signout",
  "session.revoked",
  "api_key.created",
  "api_key.deleted",
  "password.changed",
  "password.reset",
  "email.changed",
  "oauth.linked",
  "wallet.linked",
  "account.created",
  "account.deleted",
  "plan.changed",
  "credits.changed",
  "agent.provisioned",
  "agent.configured",
  "agent.deleted",
  "instance.action",
  "credentials.set",
  "operator.granted",
  "operator.revoked",
  "user.suspended",
  "user.unsuspended",
  "job.retried",
  "job.cancelled",
  "service_request.updated",
  "gateway.price_changed",
  "wallet.sent",
  "node.drain_requested",
  "node.recovery_requested",
  "gateway.versions_changed",
  "organisation.created",
  "organisation.deleted",
  "ownership.transferred",
  "member.added",
  "member.role_changed",
  "member.removed",
  "invitation.sent",
  "invitation.revoked",
  "invitation.accepted",
  "seats.changed",
  "branding.changed",
  "sso.configured",
  "sso.removed",
  "domain.added",
  "domain.verified",
  "domain.removed",
  "domain.sso_changed",
  "auth.break_glass",
  "scim.token_created",
  "scim.token_revoked",
  "scim.group_roles_changed",
  "scim.user_provisioned",
  "scim.user_changed",
  "scim.user_deactivated",
  "scim.user_reactivated",
  "scim.user_deleted",
  "scim.group_changed",
  "storage.limit_changed",
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export type ActorType = "user" | "api_key" | "operator" | "system";

export interface AuditActor {
  type: ActorType;
  /** usr_… for a user or operator, key_… for an API key, absent for the system. */
  id?: string;
  /** The account acting (an API key's owner); entries concern it unless told otherwise. */
  userId?: string;
}

export const SYSTEM_ACTOR: AuditActor = { type: "system" };

type DetailValue = string | number | boolean | null;

export interface AuditEntryInput {
  action: AuditAction;
  outcome?: "success" | "failure";
  /** The account the entry concerns; defaults to the acting account (null: no account). */
  userId?: string | null;
  target?: string;
  details?: Record<string, DetailValue>;
  actor?: AuditActor;
  ip?: string;
}

interface AuditScope {
  actor?: AuditActor;
  ip?: string;
}

const scope = new AsyncLocalStorage<AuditScope>();

/**
 * Runs `fn` with the caller and IP every `recordAudit` inside it falls back to. `value` becomes
 * the scope's store when no scope is open (the API's fast path: no copy per request), so pass a
 * fresh object.
 */
export function withAuditScope<T>(value: AuditScope, fn: () => T): T {
  const outer = scope.getStore();
  return scope.run(outer ? { ...outer, ...value } : value, fn);
}

/**
 * Names the caller of the current scope once its credential is known (pages resolve their
 * session inside the scope the server entry opened with the client IP). A scope that already
 * names one keeps it.
 */
export function noteAuditActor(actor: AuditActor): void {
  const store = scope.getStore();
  if (store && !store.actor) store.actor = actor;
}

// Keys that would carry a secret; a caller naming one is a bug, not data to keep.
const SECRET_KEY = /pass|secret|token|cookie|authorization|seal|credential|^key$|apikey|private/i;
const SECRET_VALUE = /^(sk_|whsec_|Bearer )/;

function checkedDetails(details: Record<string, DetailValue> = {}): Record<string, DetailValue> {
  for (const [key, value] of Object.entries(details)) {
    if (SECRET_KEY.test(key) || (typeof value === "string" && SECRET_VALUE.test(value))) {
      throw new Error(`audit detail "${key}" looks like a secret; audit entries never hold one`);
    }
  }
  return details;
}

/** Appends one entry. Pass the transaction of the change so both commit or neither does. */
export async function recordAudit(entry: AuditEntryInput, sql: Queryable = db()): Promise<void> {
  const current = scope.getStore();
  const actor = entry.actor ?? current?.actor ?? SYSTEM_ACTOR;
  const userId = entry.userId !== undefined ? entry.userId : (actor.userId ?? null);
  const ip = entry.ip ?? current?.ip ?? null;
  const details = checkedDetails(entry.details);
  await sql`
    insert into audit_log (user_id, actor_type, actor_id, ip, action, target, outcome, details)
    values (${userId}, ${actor.type}, ${actor.id ?? null}, ${ip}, ${entry.action},
            ${entry.target ?? null}, ${entry.outcome ?? "success"}, ${sql.json(details)})`;
}

// --- reading ------------------------------------------------------------------------------

export interface AuditEntry {
  id: string;
  at: string;
  userId: string | null;
  actorType: ActorType;
  actorId: string | null;
  ip: string | null;
  action: string;
  target: string | null;
  outcome: "success" | "failure";
  details: Record<string, DetailValue>;
}

interface AuditRow {
  id: number;
  at: Date;
  user_id: string | null;
  actor_type: ActorType;
  actor_id: string | null;
  ip: string | null;
  action: string;
  target: string | null;
  outcome: "success" | "failure";
  details: Record<string, DetailValue>;
}

const toEntry = (r: AuditRow): AuditEntry => ({
  id: String(r.id),
  at: r.at.toISOString(),
  userId: r.user_id,
  actorType: r.actor_type,
  actorId: r.actor_id,
  ip: r.ip,
  action: r.action,
  target: r.target,
  outcome: r.outcome,
  details: r.details,
});

export interface AuditPage {
  entries: AuditEntry[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/**
 * Entries newest first. `userId` scopes to one account's entries; `null` reads every entry
 * (operators only: the caller checks). `before` is the previous page's nextCursor.
 */
export async function listAudit(options: {
  userId: string | null;
  limit: number;
  before?: number | undefined;
  action?: string | undefined;
}): Promise<AuditPage> {
  const { userId, limit, before, action } = options;
  const rows = await db()<AuditRow[]>`
    select * from audit_log
    where true
      ${userId === null ? db()`` : db()`and user_id = ${userId}`}
      ${before === undefined ? db()`` : db()`and id < ${before}`}
      ${action === undefined ? db()`` : db()`and action = ${action}`}
    order by id desc
    limit ${limit + 1}`;
  const page = rows.slice(0, limit);
  return {
    entries: page.map(toEntry),
    nextCursor: rows.length > limit ? String(page[page.length - 1]!.id) : null,
  };
}

/** Every entry of the scope, newest first, read a page at a time (the CSV/JSON export). */
export async function* allAudit(userId: string | null): AsyncGenerator<AuditEntry> {
  let before: number | undefined;
  for (;;) {
    const page = await listAudit({ userId, limit: 1000, before });
    yield* page.entries;
    if (!page.nextCursor) return;
    before = Number(page.nextCursor);
  }
}

const CSV_COLUMNS = [
  "id",
  "at",
  "userId",
  "actorType",
  "actorId",
  "ip",
  "action",
  "target",
  "outcome",
  "details",
] as const;

function csvCell(value: unknown): string {
  const text =
    value === null || value === undefined
      ? ""
      : typeof value === "object"
        ? JSON.stringify(value)
        : String(value);
  // Quote always; a leading formula character is defused for spreadsheet programs.
  const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return `"${safe.replaceAll('"', '""')}"`;
}

export function auditCsv(entries: Iterable<AuditEntry>): string {
  const lines = [CSV_COLUMNS.join(",")];
  for (const entry of entries) lines.push(CSV_COLUMNS.map((c) => csvCell(entry[c])).join(","));
  return `${lines.join("\r\n")}\r\n`;
}

// --- retention ------------------------------------------------------------------------------

/**
 * Deletes entries older than `days`, or `extendedDays` for the accounts in `extendedUserIds`
 * (the retention billing sells; the caller asks billing). The only DELETE the table's trigger
 * lets through, and never of a row younger than 90 days. Returns how many rows went.
 */
export async function purgeExpiredAudit(retention: {
  days: number;
  extendedDays: number;
  extendedUserIds: readonly string[];
}): Promise<number> {
  const { days, extendedDays, extendedUserIds } = retention;
  return db().begin(async (tx) => {
    await tx`select set_config('audit.purge', 'on', true)`;
    const result = await tx`
      delete from audit_log
      where at < now() - make_interval(days => ${extendedDays})
         or (at < now() - make_interval(days => ${days})
             and (user_id is null or user_id <> all(${extendedUserIds as string[]})))`;
    return result.count;
  });
}
