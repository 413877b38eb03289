import { afterAll, describe, expect, it } from "vitest";
import * as password from "../../app/routes/api.settings.password.ts";
import * as settings from "../../app/routes/api.settings.ts";
import * as user from "../../app/routes/api.user.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { rateLimitScopes } from "../../app/server/platform/rate-limit.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { as, cookieOf, newUser, signInUser } from "./helpers.ts";

describe("PATCH /api/settings", () => {
  it("updates name and avatar (https URL) and emits user.updated", async () => {
    const u = await newUser();
    const res = await as(u, settings, "/api/settings", {
      method: "PATCH",
      body: { name: "  Ada Lovelace ", avatar: "https://cdn.example.com/ada.png" },
    });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      success: true,
      user: { id: u.id, name: "Ada Lovelace", avatar: "https://cdn.example.com/ada.png" },
    });
    expect((await as(u, user, "/api/user")).json.user.name).toBe("Ada Lovelace");
    const [event] =
      await db()`select data from events where type = 'user.updated' and data->>'id' = ${u.id}`;
    expect(event?.data).toMatchObject({
      name: "Ada Lovelace",
      avatar: "https://cdn.example.com/ada.png",
      changed: ["name", "avatar"],
    });
    const cleared = await as(u, settings, "/api/settings", {
      method: "PATCH",
      body: { avatar: "" },
    });
    expect(cleared.json.user).toMatchObject({ name: "Ada Lovelace", avatar: null });
  });

  it.each([
    [{ avatar: "http://cdn.example.com/a.png" }, /^avatar: /],
    [{ avatar: "javascript:alert(1)" }, /^avatar: /],
    [{ name: "" }, /^name: /],
    [{ name: "x".repeat(101) }, /^name: /],
  ])("answers 400 for %j", async (body, message) => {
    const u = await newUser();
    const res = await as(u, settings, "/api/settings", { method: "PATCH", body });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  it("emits nothing for an empty update", async () => {
    const u = await newUser();
    const res = await as(u, settings, "/api/settings", { method: "PATCH", body: {} });
    expect(res.status).toBe(200);
    expect(
      await db()`select 1 from events where type = 'user.updated' and data->>'id' = ${u.id}`,
    ).toHaveLength(0);
  });

  it("answers 401 without a session", async () => {
    const res = await as({}, settings, "/api/settings", { method: "PATCH", body: { name: "x" } });
    expect(res.status).toBe(401);
  });
});

describe("POST /api/settings/password", () => {
  it("needs the current password, then revokes every other session", async () => {
    const u = await newUser();
    const other = cookieOf(await signInUser(u.email, u.password));
    const wrong = await as(u, password, "/api/settings/password", {
      method: "POST",
      body: { currentPassword: "not it", newPassword: "brand new password" },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error).toMatch(/^currentPassword: /);
    const missing = await as(u, password, "/api/settings/password", {
      method: "POST",
      body: { newPassword: "brand new password" },
    });
    expect(missing.status).toBe(400);
    const short = await as(u, password, "/api/settings/password", {
      method: "POST",
      body: { currentPassword: u.password, newPassword: "short" },
    });
    expect(short.status).toBe(400);
    expect(short.json.error).toMatch(/^newPassword: /);

    const ok = await as(u, password, "/api/settings/password", {
      method: "POST",
      body: { currentPassword: u.password, newPassword: "brand new password" },
    });
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({ success: true });
    expect((await as(u, user, "/api/user")).status).toBe(200); // this session stays
    expect((await as({ cookie: other }, user, "/api/user")).status).toBe(401);
    expect((await signInUser(u.email, u.password)).status).toBe(401);
    expect((await signInUser(u.email, "brand new password")).status).toBe(200);
  });

  it("counts wrong current passwords like sign-in failures: a session cannot guess on", async () => {
    const u = await newUser();
    const change = (currentPassword: string) =>
      as(u, password, "/api/settings/password", {
        method: "POST",
        body: { currentPassword, newPassword: "brand new password" },
      });
    const { points } = rateLimitScopes["signin-failures"];
    for (let i = 0; i < points; i++) expect((await change(`guess-${i}`)).status).toBe(400);
    const blocked = await change(u.password);
    expect(blocked.status).toBe(429);
    expect(blocked.json).toMatchObject({
      error: "Too many failed password attempts; try again later",
      retryAfter: expect.any(Number),
    });
    expect((await signInUser(u.email, u.password)).status).toBe(429); // one budget per account
  });
});

describe("DELETE /api/user", () => {
  afterAll(async () => {
    await stopWorker(5_000);
  });

  it("deletes the account, enqueues its agents' teardown and emits user.deleted", async () => {
    const u = await newUser();
    const res = await as(u, user, "/api/user", { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ success: true });
    expect(res.headers.getSetCookie()[0]).toMatch(/Max-Age=0/);
    expect(await db()`select 1 from users where id = ${u.id}`).toHaveLength(0);
    expect(await db()`select 1 from sessions where user_id = ${u.id}`).toHaveLength(0);
    expect((await as(u, user, "/api/user")).status).toBe(401);
    expect((await signInUser(u.email, u.password)).status).toBe(401);
    const [event] =
      await db()`select data from events where type = 'user.deleted' and data->>'id' = ${u.id}`;
    expect(event?.data).toEqual({ id: u.id, email: u.email });

    // The teardown job is queued and runs: the user had no instance, so nothing was removed.
    const boss = await getBoss();
    const jobs = await boss.findJobs("teardown-instance", { data: { userId: u.id } });
    expect(jobs).toHaveLength(1);
    await startWorker();
    await expect
      .poll(async () => (await boss.findJobs("teardown-instance", { id: jobs[0]!.id }))[0]?.state)
      .toBe("completed");
    const [done] = await boss.findJobs("teardown-instance", { id: jobs[0]!.id });
    expect(done?.output).toMatchObject({ userId: u.id, instancesFound: 0, containersRemoved: 0 });
  });

  it("answers 401 without a session and 403 from another site", async () => {
    expect((await as({}, user, "/api/user", { method: "DELETE" })).status).toBe(401);
    const u = await newUser();
    const res = await as(u, user, "/api/user", {
      method: "DELETE",
      headers: { origin: "https://evil.example" },
    });
    expect(res.status).toBe(403);
    expect((await as(u, user, "/api/user")).status).toBe(200);
  });
});
