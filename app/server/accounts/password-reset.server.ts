import { db } from "../platform/db.server.ts";
import { txExecutor } from "../platform/db-helpers.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { randomToken, sha256 } from "../platform/ids.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { payReferral } from "./credits.server.ts";
import { revokeUnprovenAccess } from "./takeover.server.ts";
import { findUserByEmail, setPassword } from "./users.server.ts";

// Password reset: a random 256-bit token, stored as SHA-256, valid for one hour and once. The
// email goes out through the send-email job. docs/decisions/0016-password-reset.md

export const RESET_TOKEN_LIFETIME_MINUTES = 60;
export const FORGOT_PASSWORD_MESSAGE = "If an account exists, a reset link has been sent";
export const RESET_DONE_MESSAGE = "Password reset successfully";

/** Sends a reset link when the account exists; says nothing either way. */
export async function requestPasswordReset(email: string): Promise<void> {
  const user = await findUserByEmail(email);
  if (!user) return;
  const token = randomToken(32);
  const link = new URL("/reset-password", env().APP_URL);
  link.searchParams.set("token", token);
  await db().begin(async (t) => {
    await t`
      insert into password_reset_tokens (token_hash, user_id, expires_at)
      values (${sha256(token)}, ${user.id},
              now() + make_interval(mins => ${RESET_TOKEN_LIFETIME_MINUTES}))`;
    await sendJob(
      "send-email",
      {
        to: user.email,
        subject: "Reset your Agent Platform password",
        text: [
          `Hello ${user.name},`,
          "",
          "Someone (hopefully you) asked to reset the password of your Agent Platform account.",
          `Open this link within ${RESET_TOKEN_LIFETIME_MINUTES} minutes to choose a new one:`,
          "",
          link.toString(),
          "",
          "If you did not ask for this, ignore this email: your password stays as it is.",
        ].join("\n"),
      },
      { db: txExecutor(t) },
    );
  });
}

/** Uses a reset token once: 400 for an unknown, used or expired token, 404 when its user is gone. */
export async function resetPassword(token: string, password: string): Promise<void> {
  await db().begin(async (t) => {
    // Claiming the token first makes a concurrent second use find it used.
    const [row] = await t<{ user_id: string | null; expired: boolean }[]>`
      update password_reset_tokens set used_at = now()
      where token_hash = ${sha256(token)} and used_at is null
      returning user_id, expires_at <= now() as expired`;
    if (!row) throw new DomainError(400, "token: invalid or already used");
    if (row.expired) throw new DomainError(400, "token: expired");
    if (!row.user_id) throw new DomainError(404, "User not found");
    // The link came through the mailbox, which proves the email. If it was not proven before,
    // whoever registered it could have been someone else: every way in set up until now (API
    // keys, security keys) goes, as on a first OAuth or wallet sign-in (decision 0017).
    const [user] = await t<{ email_verified: boolean }[]>`
      select email_verified from users where id = ${row.user_id} for update`;
    if (user && !user.email_verified) {
      await revokeUnprovenAccess(row.user_id, t);
      await t`update users set email_verified = true where id = ${row.user_id}`;
      await payReferral(t, row.user_id);
    }
    await setPassword(row.user_id, password, t);
    // Any other outstanding links of this user stop working too.
    await t`update password_reset_tokens set used_at = now()
            where user_id = ${row.user_id} and used_at is null`;
  });
}
