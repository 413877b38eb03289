import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { txExecutor } from "../platform/db-helpers.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { randomToken, sha256 } from "../platform/ids.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { forgive } from "../platform/rate-limit.server.ts";
import { credentialCache } from "./credential-cache.server.ts";
import { payReferral } from "./credits.server.ts";
import { emitEvent } from "./events.server.ts";
import { asPerson, publicUser, toUser, type UserRow } from "./model.server.ts";
import { countPasswordAttempt, failureKey, verifyPassword } from "./passwords.server.ts";
import { findUserByEmail } from "./users.server.ts";

// Changing the sign-in email (decision 0156): the current password (when the account has one)
// asks; a link sent to the new address confirms, so nobody moves an account to an address they
// do not read; the old address is told once it is done. Audited as `email.changed`.

export const EMAIL_CHANGE_LIFETIME_HOURS = 24;

/** Sends the confirmation link to `newEmail`; the account keeps its email until it is opened. */
export async function requestEmailChange(
  userId: string,
  newEmail: string,
  currentPassword: string | undefined,
): Promise<{ pendingEmail: string }> {
  const row = asPerson((await db()<UserRow[]>`select * from users where id = ${userId}`)[0]);
  if (!row) throw new DomainError(404, "User not found");
  const email = newEmail.trim();
  if (email.toLowerCase() === row.email.toLowerCase()) {
    throw new DomainError(400, "newEmail: is already this account's email");
  }
  if (row.password_hash) {
    if (!currentPassword) throw new DomainError(400, "currentPassword: is required");
    // The same budget as sign-in: a stolen session must not be a way to guess the password.
    await countPasswordAttempt(row.email);
    if (!(await verifyPassword(row.password_hash, currentPassword))) {
      await recordAudit({ action: "email.changed", userId, outcome: "failure" });
      throw new DomainError(400, "currentPassword: is incorrect");
    }
    await forgive("signin-failures", failureKey(row.email));
  }
  if (await findUserByEmail(email)) {
    throw new DomainError(409, "A user with this email already exists");
  }
  const token = randomToken(32);
  const link = new URL("/settings/email/confirm", env().APP_URL);
  link.searchParams.set("token", token);
  await db().begin(async (t) => {
    // One pending change at a time: an older link stops working.
    await t`update email_change_tokens set used_at = now()
            where user_id = ${userId} and used_at is null`;
    await t`
      insert into email_change_tokens (token_hash, user_id, new_email, expires_at)
      values (${sha256(token)}, ${userId}, ${email},
              now() + make_interval(hours => ${EMAIL_CHANGE_LIFETIME_HOURS}))`;
    await sendJob(
      "send-email",
      {
        to: email,
        subject: "Confirm your new Agent Platform email",
        text: [
          `Hello ${row.name},`,
          "",
          `Someone (hopefully you) asked to change the email of your Agent Platform account from ${row.email} to this address.`,
          `Open this link within ${EMAIL_CHANGE_LIFETIME_HOURS} hours to confirm:`,
          "",
          link.toString(),
          "",
          "If you did not ask for this, ignore this email: the account keeps its email.",
        ].join("\n"),
      },
      { db: txExecutor(t) },
    );
  });
  return { pendingEmail: email };
}

/** The new address a valid token would set (for the confirmation page), else undefined. */
export async function pendingEmailChange(token: string): Promise<string | undefined> {
  const [row] = await db()<{ new_email: string }[]>`
    select new_email from email_change_tokens
    where token_hash = ${sha256(token)} and used_at is null and expires_at > now()`;
  return row?.new_email;
}

/** Uses a token once: the account's email becomes the new (now proven) one; the old is told. */
export async function confirmEmailChange(token: string) {
  const user = await db().begin(async (t) => {
    // Claiming the token first makes a concurrent second use find it used.
    const [claim] = await t<{ user_id: string; new_email: string; expired: boolean }[]>`
      update email_change_tokens set used_at = now()
      where token_hash = ${sha256(token)} and used_at is null
      returning user_id, new_email, expires_at <= now() as expired`;
    if (!claim) throw new DomainError(400, "token: invalid or already used");
    if (claim.expired) throw new DomainError(400, "token: expired");
    const before = asPerson(
      (await t<UserRow[]>`select * from users where id = ${claim.user_id} for update`)[0],
    );
    if (!before) throw new DomainError(404, "User not found");
    const taken = await findUserByEmail(claim.new_email, t);
    if (taken && taken.id !== claim.user_id) {
      throw new DomainError(409, "A user with this email already exists");
    }
    let row: UserRow | undefined;
    try {
      [row] = await t<UserRow[]>`
        update users set email = ${claim.new_email}, email_verified = true, updated_at = now()
        where id = ${claim.user_id} returning *`;
    } catch (error) {
      if ((error as { code?: string }).code === "23505") {
        throw new DomainError(409, "A user with this email already exists");
      }
      throw error;
    }
    const changed = toUser(row as UserRow);
    // The new address is proven: a referral waiting for a verified email is paid (once).
    await payReferral(t, changed.id);
    await recordAudit(
      {
        action: "email.changed",
        userId: changed.id,
        target: changed.id,
        details: { from: before.email, to: changed.email },
      },
      t,
    );
    await emitEvent(t, "user.updated", {
      ...publicUser(changed),
      avatar: changed.avatarUrl,
      changed: ["email"],
    });
    await sendJob(
      "send-email",
      {
        to: before.email,
        subject: "Your Agent Platform email was changed",
        text: [
          `Hello ${changed.name},`,
          "",
          `The email of your Agent Platform account was changed from this address to ${changed.email}.`,
          "You now sign in with the new address.",
          "",
          "If this was not you, reset your password at once and contact this server's operator.",
        ].join("\n"),
      },
      { db: txExecutor(t) },
    );
    return changed;
  });
  credentialCache()?.forgetUser(user.id);
  return user;
}
