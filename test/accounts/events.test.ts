import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as settings from "../../app/routes/api.settings.ts";
import * as user from "../../app/routes/api.user.ts";
import { verifyWebhook } from "../../app/server/accounts/events.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { as, newUser } from "./helpers.ts";

// Operator endpoints are real HTTP servers in this test; deliveries go web → pg-boss → worker.
interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}
const received: Received[] = [];
/** The flaky endpoint fails the first two attempts of every message about a "Flaky" user. */
const flakyAttempts = new Map<string, number>();
let server: Server;
const secret = `whsec_${randomBytes(24).toString("base64")}`;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      received.push({ path: req.url ?? "", headers: req.headers, body });
      const id = `${req.url} ${req.headers["webhook-id"]}`;
      const attempts = (flakyAttempts.get(id) ?? 0) + 1;
      flakyAttempts.set(id, attempts);
      if (req.url === "/flaky" && body.includes('"name":"Flaky') && attempts <= 2) {
        res.writeHead(503).end("down for maintenance");
        return;
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const base = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  process.env.WEBHOOK_ENDPOINTS = `${base}/hooks, ${base}/flaky`;
  process.env.WEBHOOK_SIGNING_SECRET = secret;
  resetEnvCache();
  await startWorker();
});

afterAll(async () => {
  await stopWorker(5_000);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  delete process.env.WEBHOOK_ENDPOINTS;
  delete process.env.WEBHOOK_SIGNING_SECRET;
  resetEnvCache();
});

const toHeaders = (h: IncomingHttpHeaders) =>
  new Headers(Object.entries(h).map(([k, v]): [string, string] => [k, String(v)]));

const deliveriesOf = (userId: string, path: string, type: string) =>
  received.filter((r) => {
    if (r.path !== path) return false;
    const body = JSON.parse(r.body);
    return body.type === type && body.data.id === userId;
  });

describe("outgoing events", () => {
  it("POSTs user.created, user.updated and user.deleted as signed Standard Webhooks", async () => {
    const u = await newUser({ name: "Evented" });
    await as(u, settings, "/api/settings", { method: "PATCH", body: { name: "Renamed" } });
    await as(u, user, "/api/user", { method: "DELETE" });

    for (const type of ["user.created", "user.updated", "user.deleted"]) {
      await expect
        .poll(() => deliveriesOf(u.id, "/hooks", type).length, { timeout: 10_000 })
        .toBe(1);
      const d = deliveriesOf(u.id, "/hooks", type)[0]!;
      expect(d.headers["content-type"]).toBe("application/json");
      expect(d.headers["webhook-id"]).toMatch(/^msg_/);
      expect(d.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
      expect(verifyWebhook(secret, toHeaders(d.headers), d.body)).toBe(true);
      // A tampered body or another secret does not verify.
      expect(verifyWebhook(secret, toHeaders(d.headers), d.body.replace("user", "usEr"))).toBe(
        false,
      );
      expect(
        verifyWebhook(`whsec_${randomBytes(24).toString("base64")}`, toHeaders(d.headers), d.body),
      ).toBe(false);
      const body = JSON.parse(d.body);
      expect(Object.keys(body).sort()).toEqual(["data", "timestamp", "type"]);
      expect(body.timestamp).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
    }
    const created = JSON.parse(deliveriesOf(u.id, "/hooks", "user.created")[0]!.body);
    expect(created.data).toMatchObject({ id: u.id, email: u.email, name: "Evented", plan: "free" });
    const updated = JSON.parse(deliveriesOf(u.id, "/hooks", "user.updated")[0]!.body);
    expect(updated.data).toMatchObject({ id: u.id, name: "Renamed", changed: ["name"] });
  });

  it("retries a failing endpoint with backoff and records every attempt", async () => {
    const u = await newUser({ name: "Flaky Fred" });
    // The healthy endpoint gets it once; the flaky one fails twice, then succeeds.
    await expect
      .poll(() => deliveriesOf(u.id, "/flaky", "user.created").length, { timeout: 25_000 })
      .toBe(3);
    expect(deliveriesOf(u.id, "/hooks", "user.created")).toHaveLength(1);
    const flaky = deliveriesOf(u.id, "/flaky", "user.created");
    // Same message id on every attempt, so the receiver can de-duplicate.
    expect(new Set(flaky.map((d) => d.headers["webhook-id"])).size).toBe(1);
    const eventId = flaky[0]!.headers["webhook-id"] as string;
    await expect
      .poll(async () =>
        (
          await db()`select attempt, status, error from webhook_deliveries
            where event_id = ${eventId} and url like '%/flaky' order by attempt`
        ).map((r) => ({ ...r })),
      )
      .toEqual([
        { attempt: 1, status: 503, error: "endpoint answered 503" },
        { attempt: 2, status: 503, error: "endpoint answered 503" },
        { attempt: 3, status: 204, error: null },
      ]);
  }, 40_000);
});
