import { expect } from "vitest";
import * as forgot from "../../app/routes/api.auth.forgot-password.ts";
import * as reset from "../../app/routes/api.auth.reset-password.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";

// Proving an account's email the way its owner does (decision 0016): ask for a reset link, read
// it from the `send-email` job the request queued (what the worker would mail), open it. The
// link changes the password (an unproven account's other ways in are revoked with it).

let n = 0;
const freshIp = () => `192.0.2.${(++n % 250) + 1}`;

/** Verifies `email` through the password-reset link; returns the password it now has. */
export async function verifyEmailByResetLink(email: string): Promise<string> {
  const asked = await call(forgot, "/api/auth/forgot-password", {
    method: "POST",
    body: { email },
    remoteAddress: freshIp(),
  });
  expect(asked.status).toBe(200);
  const jobs = await db()<{ text: string }[]>`
    select data->>'text' as text from pgboss.job
    where name = 'send-email' and lower(data->>'to') = lower(${email})
    order by created_on desc limit 1`;
  const token = jobs[0]?.text.match(/reset-password\?token=([A-Za-z0-9_-]+)/)?.[1];
  if (!token) throw new Error(`no reset link queued for ${email}`);
  const password = `proven-${n}-password`;
  const done = await call(reset, "/api/auth/reset-password", {
    method: "POST",
    body: { token, password },
    remoteAddress: freshIp(),
  });
  expect(done.status).toBe(200);
  return password;
}
