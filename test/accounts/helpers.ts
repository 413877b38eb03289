import * as signIn from "../../app/routes/api.auth.callback.credentials.ts";
import * as register from "../../app/routes/api.register.ts";
import { type CallOptions, type CallResult, call, type RouteModule } from "../helpers/api.ts";

// Account helpers for tests: every call goes through the real route handlers.

let counter = 0;
/** A unique email per call (files run in parallel, each with its own database). */
export const uniqueEmail = (prefix = "user") => `${prefix}-${Date.now()}-${++counter}@example.com`;

/** `name=value` of a Set-Cookie header, for sending back. */
export function cookieOf(res: CallResult | Response, name = "__session"): string {
  const headers = "headers" in res ? res.headers : (res as Response).headers;
  const set = headers.getSetCookie().find((c) => c.startsWith(`${name}=`));
  if (!set) throw new Error(`no ${name} cookie in the response`);
  return set.split(";")[0]!;
}

export interface TestUser {
  id: string;
  email: string;
  password: string;
  cookie: string;
}

export async function registerUser(
  fields: { email?: string; password?: string; name?: string; referralCode?: string } = {},
  opts: CallOptions = {},
): Promise<CallResult> {
  return call(register, "/api/register", {
    method: "POST",
    body: { email: uniqueEmail(), password: "correct horse battery", ...fields },
    remoteAddress: `198.18.${counter % 250}.${++counter % 250}`,
    ...opts,
  });
}

/** Signs in from an address of its own unless `opts.remoteAddress` names one (per-address limit). */
export async function signInUser(email: string, password: string, opts: CallOptions = {}) {
  return call(signIn, "/api/auth/callback/credentials", {
    method: "POST",
    body: { email, password },
    remoteAddress: `198.19.${counter % 250}.${++counter % 250}`,
    ...opts,
  });
}

/** Registers a fresh user (registering signs in: one session); returns its session cookie. */
export async function newUser(fields: { email?: string; name?: string } = {}): Promise<TestUser> {
  const email = fields.email ?? uniqueEmail();
  const password = "correct horse battery";
  const reg = await registerUser({
    email,
    password,
    ...(fields.name ? { name: fields.name } : {}),
  });
  if (reg.status !== 201) throw new Error(`register failed: ${reg.status} ${reg.text}`);
  return { id: reg.json.id, email, password, cookie: cookieOf(reg) };
}

/** Calls a route as a signed-in browser (cookie) or a program (API key). */
export function as(
  who: { cookie?: string; key?: string },
  module: RouteModule,
  path: string,
  opts: CallOptions = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (who.cookie) headers.cookie = who.cookie;
  if (who.key) headers.authorization = `Bearer ${who.key}`;
  return call(module, path, { ...opts, headers });
}
