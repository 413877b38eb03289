import { afterAll, describe, expect, it } from "vitest";
import * as keyById from "../../app/routes/api.keys.$id.ts";
import * as keys from "../../app/routes/api.keys.ts";
import * as sessionById from "../../app/routes/api.sessions.$id.ts";
import * as sessions from "../../app/routes/api.sessions.ts";
import * as user from "../../app/routes/api.user.ts";
import {
  createCredentialCache,
  credentialCache,
} from "../../app/server/accounts/credential-cache.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env, resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sha256 } from "../../app/server/platform/ids.server.ts";
import { as, newUser, signInUser } from "./helpers.ts";

// The credential cache (decision 0120) on: a cached key or session stops working at once when
// it is deleted or revoked, in this process and in a second replica (its own listening
// connection), and nothing is trusted while the listener may have missed a message.
process.env.CREDENTIAL_CACHE = "on";
resetEnvCache();

const hex = (secret: string) => sha256(secret).toString("hex");
const rawCookie = (cookie: string) => cookie.slice(cookie.indexOf("=") + 1);

/** A second replica's cache: its own LISTEN connection on the same database. */
const replica = createCredentialCache(env().DATABASE_URL!, { heartbeatMs: 100 });
afterAll(() => replica.stop());

async function createKey(cookie: string) {
  const res = await as({ cookie }, keys, "/api/keys", { method: "POST", body: { name: "ci" } });
  expect(res.status).toBe(201);
  return res.json as { id: string; key: string };
}

/** Waits until this process's cache listens (its first heartbeat echo). */
async function cacheReady() {
  await expect.poll(() => credentialCache()?.epoch() !== undefined).toBe(true);
  const u = await newUser();
  const { key } = await createKey(u.cookie);
  // The first lookup may not be kept (the listener's first echo, the touch's NOTIFY): call
  // until it is.
  await expect
    .poll(async () => {
      await as({ key }, user, "/api/user");
      return credentialCache()!.key(hex(key)) !== undefined;
    })
    .toBe(true);
}

describe("credential cache", () => {
  it("answers a known key from memory and refuses it at once when it is deleted", async () => {
    await cacheReady();
    const u = await newUser({ name: "Cached" });
    const { key, id } = await createKey(u.cookie);
    await expect
      .poll(async () => {
        expect((await as({ key }, user, "/api/user")).status).toBe(200);
        return credentialCache()!.key(hex(key))?.keyId;
      })
      .toBe(id);
    // Cached: the user as read, with no database round trip for the credential.
    expect(credentialCache()!.key(hex(key))!.user.name).toBe("Cached");

    const del = await as({ cookie: u.cookie }, keyById, `/api/keys/${id}`, {
      method: "DELETE",
      params: { id },
    });
    expect(del.status).toBe(200);
    // The very next request: 401, no waiting.
    const after = await as({ key }, user, "/api/user");
    expect(after.status).toBe(401);
  });

  it("refuses a revoked session at once, and a signed-out one", async () => {
    await cacheReady();
    const u = await newUser();
    const other = await signInUser(u.email, u.password);
    const otherCookie = other.headers.getSetCookie()[0]!.split(";")[0]!;
    for (const cookie of [u.cookie, otherCookie]) {
      await expect
        .poll(async () => {
          expect((await as({ cookie }, user, "/api/user")).status).toBe(200);
          return credentialCache()!.session(hex(rawCookie(cookie))) !== undefined;
        })
        .toBe(true);
    }
    const list = await as({ cookie: u.cookie }, sessions, "/api/sessions");
    const target = (list.json.sessions as { id: string; current: boolean }[]).find(
      (s) => !s.current,
    )!;
    const revoked = await as({ cookie: u.cookie }, sessionById, `/api/sessions/${target.id}`, {
      method: "DELETE",
      params: { id: target.id },
    });
    expect(revoked.status).toBe(200);
    expect((await as({ cookie: otherCookie }, user, "/api/user")).status).toBe(401);
    // The session that revoked it still works.
    expect((await as({ cookie: u.cookie }, user, "/api/user")).status).toBe(200);
  });

  it("a second replica drops a key deleted elsewhere as soon as PostgreSQL tells it", async () => {
    await replica.ready;
    await expect.poll(() => replica.cache.size >= 0 && isLive()).toBe(true);
    const u = await newUser();
    const { key, id } = await createKey(u.cookie);
    // The replica's own lookup of the key, kept in its cache.
    const entry = await lookup(key);
    await expect
      .poll(() => {
        replica.cache.putKey(hex(key), entry, replica.cache.epoch());
        return replica.cache.key(hex(key))?.keyId;
      })
      .toBe(id);
    const generation = generationOf();

    await db()`delete from api_keys where id = ${id}`;
    // Not a timeout: the entry has no expiry; the trigger's NOTIFY removes it.
    await expect.poll(() => replica.cache.key(hex(key)), { timeout: 2000 }).toBeUndefined();
    expect(generationOf()).toBe(generation);
  });

  it("a change to the user (as a suspension is) drops every credential of that user elsewhere", async () => {
    await replica.ready;
    const u = await newUser();
    const { key } = await createKey(u.cookie);
    const entry = await lookup(key);
    await expect
      .poll(() => {
        replica.cache.putKey(hex(key), entry, replica.cache.epoch());
        return replica.cache.key(hex(key)) !== undefined;
      })
      .toBe(true);
    await db()`update users set name = 'Changed' where id = ${u.id}`;
    await expect.poll(() => replica.cache.key(hex(key)), { timeout: 2000 }).toBeUndefined();
  });

  it("answers the user's plan from a cached key, and follows an operator's assignment at once", async () => {
    await cacheReady();
    const u = await newUser();
    const { key } = await createKey(u.cookie);
    await expect
      .poll(async () => {
        await as({ key }, user, "/api/user");
        return credentialCache()!.key(hex(key)) !== undefined;
      })
      .toBe(true);
    // Read with the credential: no assignment yet (null, not "not read").
    expect(credentialCache()!.key(hex(key))!.user.assignedPlan).toBeNull();
    expect((await as({ key }, user, "/api/user")).json.user.plan).toBe("free");
    await assignPlan(u.id, "collective", "usr_operator1");
    // This process forgets at once; the next lookup reads the assignment.
    expect((await as({ key }, user, "/api/user")).json.user.plan).toBe("collective");
    await assignPlan(u.id, "none", "usr_operator1");
    expect((await as({ key }, user, "/api/user")).json.user.plan).toBe("free");
  });

  it("a second replica drops a user's credentials when their plan assignment changes", async () => {
    await replica.ready;
    const u = await newUser();
    const { key } = await createKey(u.cookie);
    const entry = await lookup(key);
    await expect
      .poll(() => {
        replica.cache.putKey(hex(key), entry, replica.cache.epoch());
        return replica.cache.key(hex(key)) !== undefined;
      })
      .toBe(true);
    // Written by hand, as another replica's console would: the trigger tells this one.
    await db()`insert into plan_assignments (user_id, plan, assigned_by)
      values (${u.id}, 'solo', 'usr_operator1')`;
    await expect.poll(() => replica.cache.key(hex(key)), { timeout: 2000 }).toBeUndefined();
  });

  it("trusts nothing while its listener may have missed a message (connection lost)", async () => {
    await replica.ready;
    const u = await newUser();
    const { key, id } = await createKey(u.cookie);
    const entry = await lookup(key);
    await expect
      .poll(() => {
        replica.cache.putKey(hex(key), entry, replica.cache.epoch());
        return replica.cache.key(hex(key)) !== undefined;
      })
      .toBe(true);
    const generation = generationOf();
    // The replica's listening connection dies; the key is deleted while nobody listens.
    await db()`select pg_terminate_backend(pid) from pg_stat_activity
      where application_name = ${`agent-platform:${process.pid}:listen`}`;
    await db()`delete from api_keys where id = ${id}`;
    await expect.poll(() => generationOf()).toBeGreaterThan(generation);
    expect(replica.cache.key(hex(key))).toBeUndefined();
    // It reconnects and is trusted again once it hears its own heartbeat.
    await expect.poll(() => isLive(), { timeout: 10_000 }).toBe(true);
    expect(replica.cache.key(hex(key))).toBeUndefined();
  });

  it("does not keep a lookup that raced an invalidation", () => {
    const { cache } = replica;
    const e = cache.epoch();
    cache.forgetKey("key_whatever");
    const entry = {
      keyId: "key_x",
      user: { id: "usr_x" } as never,
      lastUsedAt: Date.now(),
    };
    cache.putKey("h", entry, e);
    expect(cache.key("h")).toBeUndefined();
  });
});

/** The replica's listener state, read through its cache's behaviour. */
function isLive(): boolean {
  const probe = { keyId: "key_probe", user: { id: "usr_probe" } as never, lastUsedAt: 0 };
  replica.cache.putKey("probe", probe, replica.cache.epoch());
  const live = replica.cache.key("probe") !== undefined;
  replica.cache.forgetKey("key_probe");
  return live;
}
function generationOf(): number {
  return replica.listener.generation;
}

/** What a replica reads for a key: the user and key row, as resolveApiKey does. */
async function lookup(key: string) {
  const [row] = await db()<{ id: string; user_id: string; email: string; name: string }[]>`
    select k.id, u.id as user_id, u.email, u.name from api_keys k join users u on u.id = k.user_id
    where k.key_hash = ${sha256(key)}`;
  return {
    keyId: row!.id,
    user: { id: row!.user_id, email: row!.email, name: row!.name } as never,
    lastUsedAt: Date.now(),
  };
}
