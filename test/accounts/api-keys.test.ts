import { describe, expect, it } from "vitest";
import * as keyById from "../../app/routes/api.keys.$id.ts";
import * as keys from "../../app/routes/api.keys.ts";
import * as sessions from "../../app/routes/api.sessions.ts";
import * as password from "../../app/routes/api.settings.password.ts";
import * as settings from "../../app/routes/api.settings.ts";
import * as user from "../../app/routes/api.user.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { sha256 } from "../../app/server/platform/ids.server.ts";
import { as, newUser, type TestUser } from "./helpers.ts";

async function createKey(u: TestUser, name = "ci") {
  const res = await as(u, keys, "/api/keys", { method: "POST", body: { name } });
  expect(res.status).toBe(201);
  return res.json as { id: string; name: string; key: string; createdAt: string };
}

describe("API keys", () => {
  it("creates a key shown once: sk_ + 32 random bytes, stored only as SHA-256", async () => {
    const u = await newUser();
    const created = await createKey(u, "deploy bot");
    expect(created).toEqual({
      id: expect.stringMatching(/^key_/),
      name: "deploy bot",
      key: expect.stringMatching(/^sk_[A-Za-z0-9_-]{43}$/),
      createdAt: expect.any(String),
    });
    expect(Buffer.from(created.key.slice(3), "base64url")).toHaveLength(32);
    const [row] = await db()`select * from api_keys where id = ${created.id}`;
    expect(Buffer.compare(row!.key_hash, sha256(created.key))).toBe(0);
    expect(JSON.stringify(row)).not.toContain(created.key.slice(3));

    const list = await as(u, keys, "/api/keys");
    expect(list.json.keys).toEqual([
      {
        id: created.id,
        name: "deploy bot",
        keyPreview: `${created.key.slice(0, 7)}…${created.key.slice(-4)}`,
        createdAt: created.createdAt,
        lastUsed: null,
      },
    ]);
    expect(list.text).not.toContain(created.key);
    const one = await as(u, keyById, `/api/keys/${created.id}`, { params: { id: created.id } });
    expect(one.status).toBe(200);
    expect(one.json).toEqual(list.json.keys[0]);
    expect(one.json.key).toBeUndefined();
  });

  it("answers 400 for a missing, empty or too long name", async () => {
    const u = await newUser();
    for (const body of [{}, { name: "" }, { name: "x".repeat(65) }]) {
      const res = await as(u, keys, "/api/keys", { method: "POST", body });
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(/^name: /);
    }
    expect(
      (await as(u, keys, "/api/keys", { method: "POST", body: { name: "x".repeat(64) } })).status,
    ).toBe(201);
  });

  it("authenticates as the owner on session endpoints; lastUsed is written at most once a minute", async () => {
    const u = await newUser({ name: "Key Owner" });
    const { key, id } = await createKey(u);
    const me = await as({ key }, user, "/api/user");
    expect(me.status).toBe(200);
    expect(me.json.user).toMatchObject({ id: u.id, name: "Key Owner" });
    const [first] =
      await db()`select last_used_at, xmin::text as version from api_keys where id = ${id}`;
    expect(first!.last_used_at).toBeInstanceOf(Date);
    for (let i = 0; i < 5; i++) expect((await as({ key }, user, "/api/user")).status).toBe(200);
    const [after] =
      await db()`select last_used_at, xmin::text as version from api_keys where id = ${id}`;
    // No write happened for the later requests: same row version, same timestamp.
    expect(after!.version).toBe(first!.version);
    expect(after!.last_used_at).toEqual(first!.last_used_at);
    await db()`update api_keys set last_used_at = now() - interval '5 minutes' where id = ${id}`;
    await as({ key }, user, "/api/user");
    const [touched] = await db()`select last_used_at from api_keys where id = ${id}`;
    expect(Date.now() - (touched!.last_used_at as Date).getTime()).toBeLessThan(60_000);

    // Other endpoints that take a session accept the key too.
    expect((await as({ key }, keys, "/api/keys")).status).toBe(200);
    expect((await as({ key }, keyById, `/api/keys/${id}`, { params: { id } })).status).toBe(200);
    expect((await as({ key }, sessions, "/api/sessions")).status).toBe(200);
    const patched = await as({ key }, settings, "/api/settings", {
      method: "PATCH",
      body: { name: "Renamed by key" },
      headers: { origin: "https://elsewhere.example" }, // keys are not cookies: no cross-site check
    });
    expect(patched.status).toBe(200);
    expect(patched.json.user.name).toBe("Renamed by key");
  });

  it("refuses a key for creating and deleting keys, changing the password and deleting the account (403)", async () => {
    const u = await newUser();
    const { key, id } = await createKey(u);
    const attempts = [
      as({ key }, keys, "/api/keys", { method: "POST", body: { name: "more" } }),
      as({ key }, keyById, `/api/keys/${id}`, { method: "DELETE", params: { id } }),
      as({ key }, password, "/api/settings/password", {
        method: "POST",
        body: { currentPassword: u.password, newPassword: "another password" },
      }),
      as({ key }, user, "/api/user", { method: "DELETE" }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(403);
      expect(res.json.error).toMatch(/signed-in session/);
    }
    expect((await as({ key }, user, "/api/user")).status).toBe(200);
  });

  it("answers 401 for an unknown key or a malformed Authorization header", async () => {
    expect((await as({ key: "sk_nope" }, user, "/api/user")).status).toBe(401);
    expect((await as({ key: "not-a-key" }, user, "/api/user")).status).toBe(401);
    const basic = await as({}, user, "/api/user", { headers: { authorization: "Basic dTpw" } });
    expect(basic.status).toBe(401);
  });

  it("a deleted key answers 401 at once", async () => {
    const u = await newUser();
    const { key, id } = await createKey(u);
    expect((await as({ key }, user, "/api/user")).status).toBe(200);
    const del = await as(u, keyById, `/api/keys/${id}`, { method: "DELETE", params: { id } });
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ success: true });
    expect((await as({ key }, user, "/api/user")).status).toBe(401);
    expect((await as(u, keyById, `/api/keys/${id}`, { params: { id } })).status).toBe(404);
    expect(
      (await as(u, keyById, `/api/keys/${id}`, { method: "DELETE", params: { id } })).status,
    ).toBe(404);
  });

  it("another user's key id answers 404 for read and delete", async () => {
    const owner = await newUser();
    const stranger = await newUser();
    const { id, key } = await createKey(owner);
    const read = await as(stranger, keyById, `/api/keys/${id}`, { params: { id } });
    expect(read.status).toBe(404);
    expect(read.json).toEqual({ error: "API key not found" });
    const del = await as(stranger, keyById, `/api/keys/${id}`, {
      method: "DELETE",
      params: { id },
    });
    expect(del.status).toBe(404);
    expect((await as({ key }, user, "/api/user")).status).toBe(200);
    expect((await as(stranger, keys, "/api/keys")).json.keys).toEqual([]);
  });

  it("answers 401 without credentials on every key endpoint", async () => {
    expect((await as({}, keys, "/api/keys")).status).toBe(401);
    expect((await as({}, keys, "/api/keys", { method: "POST", body: { name: "x" } })).status).toBe(
      401,
    );
    expect((await as({}, keyById, "/api/keys/key_x", { params: { id: "key_x" } })).status).toBe(
      401,
    );
    expect(
      (await as({}, keyById, "/api/keys/key_x", { method: "DELETE", params: { id: "key_x" } }))
        .status,
    ).toBe(401);
  });
});
