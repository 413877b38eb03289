import { Authenticator } from "remix-auth";
import { FormStrategy } from "remix-auth-form";
import {
  enforcementFor,
  recordBreakGlass,
  signInRefusal,
} from "../organisations/sso-enforcement.server.ts";
import { addressKey } from "../platform/address-key.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { attempt, forgive, refund } from "../platform/rate-limit.server.ts";
import { toUser, type User } from "./model.server.ts";
import { countPasswordAttempt, failureKey, verifyPassword } from "./passwords.server.ts";
import { findUserByEmail } from "./users.server.ts";

// Sign-in with email and password through remix-auth's FormStrategy (strategy "credentials").
// One 401 message for an unknown email and a wrong password alike, at the same cost (an
// unknown email is verified against a dummy argon2 hash). Each attempt for one email is counted
// before its password is checked; beyond 5 within 15 minutes (failed ones, or a burst sent at
// once) attempts answer 429 with Retry-After until the window ends — a correct password
// included, so guessing cannot go on at full speed; a success clears the count. Attempts from
// one client address (an IPv6 client by its /64) are counted too, before the email's, whatever
// the email: beyond 20 failures within 15 minutes the address gets 429 without any password
// being checked, so spraying many accounts from one place costs no argon2 either; a success
// gives its point back (docs/decisions/0196).

export const INVALID_CREDENTIALS = "Invalid email or password";

export async function verifyCredentials(email: string, password: string): Promise<User> {
  await countPasswordAttempt(email);
  const row = await findUserByEmail(email);
  // An organisation that requires SSO for the email's domain: only its owners' break-glass
  // password passes; everyone else is pointed to SSO before any password is checked
  // (docs/decisions/0212).
  const enforcement = await enforcementFor(email, row?.id);
  const refusal = signInRefusal(enforcement, "password");
  if (refusal) {
    if (row) {
      await recordAudit({
        action: "auth.signin",
        outcome: "failure",
        userId: row.id,
        details: { method: "password", reason: "sso_required" },
      });
    }
    throw refusal;
  }
  const ok = await verifyPassword(row?.password_hash ?? null, password);
  if (!row || !ok) {
    // The account's owner sees failed attempts on it; an unknown email concerns no account.
    await recordAudit({
      action: "auth.signin",
      outcome: "failure",
      userId: row?.id ?? null,
      details: { method: "password" },
    });
    throw new DomainError(401, INVALID_CREDENTIALS);
  }
  await forgive("signin-failures", failureKey(email));
  if (row.suspended_at) {
    await recordAudit({
      action: "auth.signin",
      outcome: "failure",
      userId: row.id,
      details: { method: "password", reason: "suspended" },
    });
    throw new DomainError(403, "This account is suspended");
  }
  await recordAudit({
    action: "auth.signin",
    actor: { type: "user", id: row.id, userId: row.id },
    details: { method: "password" },
  });
  if (enforcement?.owner) await recordBreakGlass(enforcement, { id: row.id, email: row.email });
  return toUser(row);
}

export const authenticator = new Authenticator<User>();

authenticator.use(
  new FormStrategy<User>(async ({ form }) => {
    const email = form.get("email");
    const password = form.get("password");
    if (typeof email !== "string" || !email || typeof password !== "string" || !password) {
      throw new DomainError(400, "email and password are required");
    }
    return verifyCredentials(email, password);
  }),
  "credentials",
);

export const TOO_MANY_FROM_ADDRESS =
  "Too many failed sign-in attempts from your network; try again later";

/**
 * Runs the credentials strategy on a form built from already-parsed fields, for a client at
 * `ip` (the route's client address): 429 with `retryAfter` once the address's budget is spent.
 */
export async function signInWithCredentials(
  request: Request,
  fields: { email: string; password: string },
  ip: string,
): Promise<User> {
  const key = addressKey(ip);
  const wait = await attempt("signin-address", key);
  if (wait > 0) throw new DomainError(429, TOO_MANY_FROM_ADDRESS, { retryAfter: wait });
  const user = await authenticate(request, fields);
  await refund("signin-address", key);
  return user;
}

function authenticate(request: Request, fields: { email: string; password: string }) {
  const form = new URLSearchParams(fields);
  return authenticator.authenticate(
    "credentials",
    new Request(request.url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form,
    }),
  );
}
