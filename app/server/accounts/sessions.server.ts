import { createCookie } from "@remix-run/node";
import { noteAuditActor, recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import type { Queryable } from "../platform/db-helpers.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { newId, randomToken, sha256, sha256Hex } from "../platform/ids.server.ts";
import { secrets } from "../platform/secrets.server.ts";
import { credentialCache } from "./credential-cache.server.ts";
import { toUser, type User, type UserRow } from "./model.server.ts";

// Server-side sessions in PostgreSQL. The cookie (`__session`, signed with SESSION_SECRET,
// httpOnly, SameSite=Lax, Secure when APP_URL is https) carries a random 256-bit token; the
// table keeps only its SHA-256, so a database leak yields no usable session. Expiry rolls: 30
// days after the last use, extended at most once an hour (one write per hour per active
// session, not per request). docs/decisions/0011-sessions.md

export const SESSION_COOKIE = "__session";
export const SESSION_LIFETIME_SECONDS = 30 * 24 * 60 * 60;
const REFRESH_AFTER_MS = 60 * 60 * 1000;

let cached: { key: string; cookie: ReturnType<typeof createCookie> } | undefined;

function sessionCookie() {
  const secret = secrets().sessionSecret;
  const secure = env().APP_URL.startsWith("https:");
  const key = `${secret}|${secure}`;
  if (cached?.key !== key) {
    cached = {
      key,
      cookie: createCookie(SESSION_COOKIE, {
        httpOnly: true,
        sameSite: "lax",
        secure,
        path: "/",
        maxAge: SESSION_LIFETIME_SECONDS,
        secrets: [secret],
      }),
    };
  }
  return cached.cookie;
}

export interface SessionMeta {
  ip?: string | undefined;
  userAgent?: string | undefined;
}

export interface CreatedSession {
  id: string;
  /** The Set-Cookie header value that signs the browser in. */
  setCookie: string;
}

export async function createSession(
  userId: string,
  meta: SessionMeta = {},
  sql: Queryable = db(),
): Promise<CreatedSession> {
  const [suspended] = await sql`
    select 1 from users where id = ${userId} and suspended_at is not null`;
  if (suspended) throw new DomainError(403, "This account is suspended");
  const token = randomToken(32);
  const id = newId("ses");
  await sql`
    insert into sessions (id, user_id, token_hash, expires_at, user_agent, ip)
    values (${id}, ${userId}, ${sha256(token)},
            now() + make_interval(secs => ${SESSION_LIFETIME_SECONDS}),
            ${meta.userAgent?.slice(0, 400) ?? null}, ${meta.ip ?? null})`;
  return { id, setCookie: await sessionCookie().serialize(token) };
}

export async function clearSessionCookie(): Promise<string> {
  return sessionCookie().serialize("", { maxAge: 0, expires: new Date(0) });
}

/** The session token in the request's cookie, when it carries a validly signed one. */
export async function sessionToken(request: Request): Promise<string | undefined> {
  const header = request.headers.get("cookie");
  if (!header?.includes(SESSION_COOKIE)) return undefined;
  const value = await sessionCookie().parse(header);
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

export interface ResolvedSession {
  sessionId: string;
  user: User;
  /** Present when the expiry was extended: send it so the browser's cookie rolls too. */
  setCookie?: string;
}

/** The raw (signed, still encoded) value of the first `__session` cookie in a Cookie header. */
function rawSessionCookie(header: string): string | undefined {
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq !== -1 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return value.length > 0 ? value : undefined;
    }
  }
  return undefined;
}

/**
 * The active session of the request's cookie. A cookie seen before is answered from the
 * credential cache, keyed by the hash of its signed value (no signature check, no database
 * read) while its session is unexpired and needs no refresh.
 */
export async function resolveSession(request: Request): Promise<ResolvedSession | undefined> {
  const header = request.headers.get("cookie");
  if (!header?.includes(SESSION_COOKIE)) return undefined;
  const raw = rawSessionCookie(header);
  if (!raw) return undefined;
  const cache = credentialCache();
  const cacheKey = cache ? sha256Hex(raw) : "";
  const hit = cache?.session(cacheKey);
  const now = Date.now();
  if (hit && hit.expiresAt > now && now - hit.lastSeenAt <= REFRESH_AFTER_MS) {
    noteAuditActor({ type: "user", id: hit.user.id, userId: hit.user.id });
    return { sessionId: hit.sessionId, user: hit.user };
  }
  // Exactly the value the cache is keyed by is the one verified.
  const token = await sessionCookie().parse(`${SESSION_COOKIE}=${raw}`);
  if (typeof token !== "string" || token.length === 0) return undefined;
  const epoch = cache?.epoch() ?? 0;
  const sql = db();
  const [row] = await sql<
    (UserRow & { session_id: string; last_seen_at: Date; expires_at: Date })[]
  >`
    select u.*, s.id as session_id, s.last_seen_at, s.expires_at,
      (select pa.plan from plan_assignments pa where pa.user_id = u.id) as assigned_plan
    from sessions s join users u on u.id = s.user_id
    where s.token_hash = ${sha256(token)} and s.revoked_at is null and s.expires_at > now()
      and u.suspended_at is null`;
  if (!row) return undefined;
  const resolved: ResolvedSession = { sessionId: row.session_id, user: toUser(row) };
  noteAuditActor({ type: "user", id: row.id, userId: row.id });
  if (Date.now() - row.last_seen_at.getTime() > REFRESH_AFTER_MS) {
    await sql`
      update sessions set last_seen_at = now(),
        expires_at = now() + make_interval(secs => ${SESSION_LIFETIME_SECONDS})
      where id = ${row.session_id}`;
    resolved.setCookie = await sessionCookie().serialize(token);
    // The update's NOTIFY drops this session everywhere; the next request reads it afresh.
    return resolved;
  }
  cache?.putSession(
    cacheKey,
    {
      sessionId: row.session_id,
      user: resolved.user,
      lastSeenAt: row.last_seen_at.getTime(),
      expiresAt: row.expires_at.getTime(),
    },
    epoch,
  );
  return resolved;
}

export interface SessionInfo {
  id: string;
  createdAt: string;
  lastSeenAt: string;
  expiresAt: string;
  userAgent: string | null;
  ip: string | null;
  current: boolean;
}

export async function listSessions(userId: string, currentId?: string): Promise<SessionInfo[]> {
  const rows = await db()<
    {
      id: string;
      created_at: Date;
      last_seen_at: Date;
      expires_at: Date;
      user_agent: string | null;
      ip: string | null;
    }[]
  >`
    select id, created_at, last_seen_at, expires_at, user_agent, ip from sessions
    where user_id = ${userId} and revoked_at is null and expires_at > now()
    order by last_seen_at desc`;
  return rows.map((r) => ({
    id: r.id,
    createdAt: r.created_at.toISOString(),
    lastSeenAt: r.last_seen_at.toISOString(),
    expiresAt: r.expires_at.toISOString(),
    userAgent: r.user_agent,
    ip: r.ip,
    current: r.id === currentId,
  }));
}

/** Revokes one of the user's sessions; false when there is no such active session. */
export async function revokeSession(userId: string, sessionId: string): Promise<boolean> {
  const rows = await db()`
    update sessions set revoked_at = now()
    where id = ${sessionId} and user_id = ${userId} and revoked_at is null
    returning id`;
  credentialCache()?.forgetSession(sessionId);
  if (rows.length > 0) await recordAudit({ action: "session.revoked", userId, target: sessionId });
  return rows.length > 0;
}

export async function revokeOtherSessions(
  userId: string,
  keepSessionId: string | undefined,
  sql: Queryable = db(),
): Promise<void> {
  const revoked = await sql`
    update sessions set revoked_at = now()
    where user_id = ${userId} and revoked_at is null and id is distinct from ${keepSessionId ?? null}
    returning id`;
  if (revoked.length > 0) {
    await recordAudit(
      {
        action: "session.revoked",
        userId,
        target: keepSessionId ? "other sessions" : "all sessions",
        details: { count: revoked.length },
      },
      sql,
    );
  }
  // Every credential of the user is read afresh here (the kept session and keys included).
  credentialCache()?.forgetUser(userId);
}

export async function revokeAllSessions(userId: string, sql: Queryable = db()): Promise<void> {
  await revokeOtherSessions(userId, undefined, sql);
}
