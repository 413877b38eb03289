import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { apiRoute, endpoint } from "../../app/server/api.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { isDatabaseUnavailable } from "../../app/server/platform/db-unavailable.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { call } from "../helpers/api.ts";

// Issue 52 (the soak): a request whose database connection drops mid-way (PostgreSQL restarts,
// fails over) was answered 500 "Internal server error", as a bug would be. A database that
// cannot be reached is answered 503 {error}: the client may retry (decision 0223).

const route = apiRoute({
  POST: endpoint({
    summary: "a query on a connection the database closes mid-request",
    auth: "none",
    handler: async () => {
      // The server ends the session running this query the way a fast shutdown or a failover
      // ends every session (FATAL 57P01, the connection closed under the query).
      // A client of its own: the shared pool's end() waits 5 s for a connection ended this way.
      const sql = postgres(env().DATABASE_URL ?? "", { max: 1, onnotice: () => {} });
      try {
        await sql`select pg_terminate_backend(pg_backend_pid())`;
        return { answered: true };
      } finally {
        await sql.end({ timeout: 0 });
      }
    },
  }),
  GET: endpoint({
    summary: "an unexpected error",
    auth: "none",
    handler: () => {
      throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), {
        code: "ECONNREFUSED",
        port: 9,
      });
    },
  }),
});

describe("a database that cannot be reached", () => {
  it("answers 503 {error} when the connection is closed mid-request, not 500", async () => {
    const res = await call(route, "/api/x", { method: "POST" });
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ error: "Database unavailable; try again shortly" });
    expect(res.headers.get("retry-after")).toBe("5");
    // The pool opens a new connection for the next request.
    expect((await db()`select 1 as one`)[0]?.one).toBe(1);
  });

  it("still answers 500 for a refused connection to something else than the database", async () => {
    const res = await call(route, "/api/x");
    expect(res.status).toBe(500);
    expect(res.json).toEqual({ error: "Internal server error" });
  });

  it("tells the database's errors from others by code (and port, for socket errors)", () => {
    const port = Number(new URL(env().DATABASE_URL ?? "").port || 5432);
    expect(isDatabaseUnavailable({ code: "CONNECTION_CLOSED" })).toBe(true);
    expect(isDatabaseUnavailable({ code: "57P01" })).toBe(true);
    expect(isDatabaseUnavailable({ code: "57P03" })).toBe(true);
    expect(isDatabaseUnavailable({ code: "08006" })).toBe(true);
    expect(isDatabaseUnavailable({ code: "ECONNREFUSED", port })).toBe(true);
    expect(isDatabaseUnavailable({ code: "ECONNREFUSED", port: [port] })).toBe(true);
    expect(isDatabaseUnavailable({ code: "ECONNREFUSED", port: port + 1 })).toBe(false);
    expect(isDatabaseUnavailable({ code: "ECONNREFUSED" })).toBe(false);
    // A query's socket error names no port; postgres.js gives it the query (the soak's 500s).
    const reset = Object.defineProperty(new Error("read ECONNRESET"), "query", {
      value: "select * from instances where id = $1",
    });
    expect(isDatabaseUnavailable(Object.assign(reset, { code: "ECONNRESET" }))).toBe(true);
    expect(isDatabaseUnavailable({ code: "23505" })).toBe(false);
    expect(isDatabaseUnavailable(new Error("boom"))).toBe(false);
  });
});
