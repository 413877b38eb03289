import type postgres from "postgres";
import { refuseSoleOwner, soleOwnedOrganisations } from "../organisations/sole-owner.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { type Queryable, txExecutor } from "../platform/db-helpers.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { newId, randomAlphanumeric } from "../platform/ids.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { forgive } from "../platform/rate-limit.server.ts";
import { credentialCache } from "./credential-cache.server.ts";
import { payReferral } from "./credits.server.ts";
import { emitEvent } from "./events.server.ts";
import { asPerson, publicUser, toUser, type User, type UserRow } from "./model.server.ts";
import {
  countPasswordAttempt,
  failureKey,
  hashPassword,
  verifyPassword,
} from "./passwords.server.ts";
import { revokeAllSessions, revokeOtherSessions } from "./sessions.server.ts";

/** Event payloads carry a little more than the public resource (the avatar). */
const eventUser = (u: User) => ({ ...publicUser(u), avatar: u.avatarUrl });

const REFERRAL_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
export const newReferralCode = () => randomAlphanumeric(8, REFERRAL_CODE_ALPHABET);

const isUniqueViolation = (error: unknown) =>
  (error as { code?: string } | undefined)?.code === "23505";

/** The person with this email (an organisation has none, so is never found). */
export async function findUserByEmail(email: string, sql: Queryable = db()) {
  const [row] = await sql<UserRow[]>`select * from users where lower(email) = lower(${email})`;
  return asPerson(row);
}

export async function getUser(id: string, sql: Queryable = db()): Promise<User | undefined> {
  const [row] = await sql<UserRow[]>`select * from users where id = ${id}`;
  return row && toUser(row);
}

export interface NewUser {
  email: string;
  password?: string | undefined;
  name?: string | undefined;
  referralCode?: string | undefined;
  emailVerified?: boolean;
}

/**
 * True when no account exists yet: the first one of a fresh install operates it. Concurrent
 * first sign-ups are serialised by a transaction lock, taken only while the table is empty.
 */
async function isFirstAccount(t: postgres.TransactionSql): Promise<boolean> {
  const [any] = await t`select 1 from users limit 1`;
  if (any) return false;
  await t`select pg_advisory_xact_lock(hashtext('agent-platform:first-account'))`;
  const [again] = await t`select 1 from users limit 1`;
  return !again;
}

/**
 * Creates a user (remembering the referrer a referral code names: both are credited once the
 * email is verified, `payReferral`), and emits `user.created` in the same transaction. 409 when
 * the email is taken.
 */
export async function createUser(input: NewUser, tx?: postgres.TransactionSql): Promise<User> {
  const passwordHash = input.password ? await hashPassword(input.password) : null;
  const email = input.email.trim();
  const work = async (t: postgres.TransactionSql) => {
    if (await findUserByEmail(email, t)) {
      throw new DomainError(409, "A user with this email already exists");
    }
    const [referrer] = input.referralCode
      ? await t<{ id: string }[]>`
          select id from users where referral_code = ${input.referralCode.toUpperCase()}`
      : [];
    const first = await isFirstAccount(t);
    let row: UserRow | undefined;
    try {
      [row] = await t<UserRow[]>`
        insert into users (id, email, email_verified, name, password_hash, referral_code,
                           referred_by, is_operator)
        values (${newId("usr")}, ${email}, ${input.emailVerified ?? false},
                ${input.name?.trim() || email}, ${passwordHash}, ${newReferralCode()},
                ${referrer?.id ?? null}, ${first})
        returning *`;
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new DomainError(409, "A user with this email already exists");
      }
      throw error;
    }
    const user = toUser(row!);
    // Paid now only when the email is already proven (an OAuth sign-up), else on verification.
    if (referrer) await payReferral(t, user.id);
    await emitEvent(t, "user.created", eventUser(user));
    await recordAudit(
      {
        action: "account.created",
        actor: { type: "user", id: user.id, userId: user.id },
        details: { operator: user.isOperator },
      },
      t,
    );
    return user;
  };
  return tx ? work(tx) : (db().begin(work) as Promise<User>);
}

export async function updateProfile(
  userId: string,
  changes: { name?: string | undefined; avatar?: string | null | undefined },
): Promise<User> {
  const changed = Object.keys(changes).filter(
    (k) => changes[k as keyof typeof changes] !== undefined,
  );
  if (changed.length === 0) {
    const user = await getUser(userId);
    if (!user) throw new DomainError(404, "User not found");
    return user; // nothing to change: no write, no event
  }
  return db().begin(async (t) => {
    const [row] = await t<UserRow[]>`
      update users set
        name = coalesce(${changes.name?.trim() ?? null}, name),
        avatar_url = ${changes.avatar === undefined ? t`avatar_url` : changes.avatar},
        updated_at = now()
      where id = ${userId}
      returning *`;
    if (!row) throw new DomainError(404, "User not found");
    const user = toUser(row);
    await emitEvent(t, "user.updated", { ...eventUser(user), changed });
    return user;
  }) as Promise<User>;
}

/** Changes the password after checking the current one, and revokes every other session. */
export async function changePassword(
  userId: string,
  currentPassword: string,
  newPassword: string,
  keepSessionId: string | undefined,
): Promise<void> {
  const [row] = await db()<
    { email: string; password_hash: string | null }[]
  >`select email, password_hash from users where id = ${userId}`;
  if (!row) throw new DomainError(404, "User not found");
  if (!row.password_hash) {
    throw new DomainError(
      400,
      "currentPassword: this account has no password yet; set one with a password reset",
    );
  }
  // The same budget as sign-in: a stolen session must not be a way to guess the password.
  await countPasswordAttempt(row.email);
  if (!(await verifyPassword(row.password_hash, currentPassword))) {
    await recordAudit({ action: "password.changed", userId, outcome: "failure" });
    throw new DomainError(400, "currentPassword: is incorrect");
  }
  await forgive("signin-failures", failureKey(row.email));
  const passwordHash = await hashPassword(newPassword);
  await db().begin(async (t) => {
    await t`update users set password_hash = ${passwordHash}, updated_at = now() where id = ${userId}`;
    await revokeOtherSessions(userId, keepSessionId, t);
    await recordAudit({ action: "password.changed", userId }, t);
  });
}

/** Sets a new password (reset flow) and revokes every session. */
export async function setPassword(userId: string, newPassword: string, t: Queryable) {
  const passwordHash = await hashPassword(newPassword);
  await t`update users set password_hash = ${passwordHash}, updated_at = now() where id = ${userId}`;
  await revokeAllSessions(userId, t);
  await recordAudit({ action: "password.reset", userId }, t);
}

/**
 * Deletes the account (sessions, keys, OAuth links and ledger rows go with it), enqueues the
 * teardown of its agents and emits `user.deleted`, all in one transaction. 409 while the person
 * is the only owner of an organisation (decision 0214).
 */
export async function deleteUser(userId: string): Promise<void> {
  await db().begin(async (t) => {
    const soleOwned = await soleOwnedOrganisations(t, userId);
    if (soleOwned.length > 0) throw refuseSoleOwner(soleOwned);
    const [row] = await t<UserRow[]>`delete from users where id = ${userId} returning *`;
    if (!row) throw new DomainError(404, "User not found");
    await sendJob("teardown-instance", { userId }, { db: txExecutor(t) });
    await emitEvent(t, "user.deleted", { id: userId, email: row.email });
    await recordAudit({ action: "account.deleted", userId, target: userId }, t);
  });
  credentialCache()?.forgetUser(userId);
}
