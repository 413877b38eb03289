import { afterAll, describe, expect, it } from "vitest";
import * as health from "../../app/routes/api.health.ts";
import { closeDb, db } from "../../app/server/platform/db.server.ts";
import { freePort } from "../../app/server/platform/embedded-postgres.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { checkHealth } from "../../app/server/platform/health.server.ts";
import { call } from "../helpers/api.ts";

describe("GET /api/health", () => {
  const original = process.env.DATABASE_URL;
  afterAll(async () => {
    await closeDb();
    process.env.DATABASE_URL = original;
    resetEnvCache();
  });

  it("answers 200 with database and queue ok and the version", async () => {
    const res = await call(health, "/api/health");
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ status: "ok", database: "ok", queue: "ok", version: "0.1.0" });
  });

  it("shares one check among concurrent callers, and checks afresh after it", async () => {
    const together = await Promise.all(Array.from({ length: 20 }, () => checkHealth()));
    expect(new Set(together).size).toBe(1); // one check's answer, not twenty
    expect(together[0]).toMatchObject({ status: "ok" });
    expect(await checkHealth()).not.toBe(together[0]);
  });

  it("answers 503 naming the queue when its schema is gone", async () => {
    await db().unsafe("alter schema pgboss rename to pgboss_away");
    try {
      const res = await call(health, "/api/health");
      expect(res.status).toBe(503);
      expect(res.json).toMatchObject({ status: "error", database: "ok", queue: "missing" });
    } finally {
      await db().unsafe("alter schema pgboss_away rename to pgboss");
    }
  });

  it("answers 503 naming the database when it is unreachable", async () => {
    await closeDb();
    const url = new URL(original!);
    url.port = String(await freePort());
    process.env.DATABASE_URL = url.toString();
    resetEnvCache();
    const res = await call(health, "/api/health");
    expect(res.status).toBe(503);
    expect(res.json).toMatchObject({ status: "error", database: "unreachable", queue: "unknown" });
  });
});
