import { createSession } from "../../app/server/accounts/sessions.server.ts";
import { db } from "../../app/server/platform/db.server.ts";

// Users for tests that need an id (and maybe a signed-in session) but not the sign-up flow.

/** A bare account row with this id (no password); a no-op when it exists. */
export async function ensureUser(userId: string): Promise<void> {
  await db()`insert into users (id, email, name, referral_code)
    values (${userId}, ${`${userId}@example.com`}, ${userId},
            ${userId
              .replace(/[^A-Za-z0-9]/g, "")
              .slice(-20)
              .toUpperCase()})
    on conflict (id) do nothing`;
}

const cookies = new Map<string, string>();

/** `__session=…` of a fresh session for this user (the user is created when missing). */
export async function sessionCookieFor(userId: string): Promise<string> {
  let cookie = cookies.get(userId);
  if (!cookie) {
    await ensureUser(userId);
    cookie = (await createSession(userId)).setCookie.split(";")[0]!;
    cookies.set(userId, cookie);
  }
  return cookie;
}
