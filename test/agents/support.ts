import { randomUUID } from "node:crypto";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import type { HostMemory } from "../../worker/instances/host-memory.ts";
import { type CallOptions, call, type RouteModule } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Shared set-up of the agents API tests: users with a plan, and calls as those users.

let counter = 0;
export const uniqueUserId = (prefix = "usr_agents") => `${prefix}${Date.now()}${++counter}`;

/** An active subscription row of `item` (what the Stripe webhook flow stores). */
export async function subscribe(userId: string, item = "solo", kind = "plan"): Promise<void> {
  await ensureUser(userId);
  await db()`
    insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id, status,
      current_period_end)
    values (${`sub_${randomUUID().replace(/-/g, "")}`}, ${userId}, ${`cus_${userId}`}, ${kind},
      ${item}, ${`price_${item}`}, 'active', now() + interval '30 days')`;
}

/** A signed-in user (session cookie), optionally subscribed to `plan`. */
export async function agentUser(plan?: string) {
  const id = uniqueUserId();
  await ensureUser(id);
  if (plan) await subscribe(id, plan);
  const cookie = await sessionCookieFor(id);
  return { id, cookie };
}

export async function apiKeyOf(userId: string): Promise<string> {
  return (await createApiKey(userId, "agents tests")).key;
}

/** Calls a route as the user (cookie) or with an API key (`key`). */
export function asUser(
  who: { cookie?: string; key?: string },
  module: unknown,
  path: string,
  opts: CallOptions = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (who.cookie) headers.cookie = who.cookie;
  if (who.key) headers.authorization = `Bearer ${who.key}`;
  return call(module as RouteModule, path, { ...opts, headers });
}

/**
 * A stand-in host's memory for the memory-pressure source: 24 GiB of RAM with `available` free;
 * 2 GiB of swap, 300 MiB of it in the compressed pool.
 */
export function hostWithAvailable(available: number): HostMemory {
  const GiB = 1024 ** 3;
  const MiB = 1024 ** 2;
  return {
    totalBytes: 24 * GiB,
    availableBytes: available,
    swapTotalBytes: 2 * GiB,
    swapFreeBytes: 1 * GiB,
    zswapPoolBytes: 300 * MiB,
    zswappedBytes: 800 * MiB,
  };
}
