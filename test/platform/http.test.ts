import { describe, expect, it } from "vitest";
import { z } from "zod";
import * as notFoundRoute from "../../app/routes/api.$.ts";
import { apiRoute, endpoint } from "../../app/server/api.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { DomainError } from "../../app/server/platform/errors.server.ts";
import { MAX_BODY_BYTES } from "../../app/server/platform/http.server.ts";
import { call } from "../helpers/api.ts";

const things = apiRoute({
  GET: endpoint({
    summary: "read",
    auth: "none",
    params: z.object({ id: z.string().regex(/^t_\d+$/) }),
    query: z.object({ limit: z.coerce.number().int().min(1).max(100).default(50) }),
    handler: ({ params, query }) => {
      if (params.id === "t_404") throw new DomainError(404, "Thing not found");
      if (params.id === "t_500") throw new Error("database password is hunter2");
      if (params.id === "t_302")
        throw new Response(null, { status: 302, headers: { Location: "/" } });
      return { id: params.id, limit: query.limit };
    },
  }),
  POST: endpoint({
    summary: "create",
    auth: "none",
    status: 201,
    body: z.object({ name: z.string().min(1).max(64), tags: z.array(z.string()).optional() }),
    handler: ({ body }) => ({ created: body.name }),
  }),
});

describe("the API route builder", () => {
  it("parses params and query and answers JSON with a request id", async () => {
    const res = await call(things, "/api/things/t_1?limit=7", { params: { id: "t_1" } });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ id: "t_1", limit: 7 });
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("keeps a well-formed request id from a trusted proxy and replaces others", async () => {
    const from = (remoteAddress: string, id: string) =>
      call(things, "/x", { params: { id: "t_1" }, headers: { "x-request-id": id }, remoteAddress });
    // Anyone could pick an id that collides with another request's: only a proxy's is taken.
    expect((await from("192.0.2.7", "abc-123")).headers.get("x-request-id")).not.toBe("abc-123");
    process.env.TRUSTED_PROXIES = "192.0.2.7";
    resetEnvCache();
    try {
      expect((await from("192.0.2.7", "abc-123")).headers.get("x-request-id")).toBe("abc-123");
      expect((await from("192.0.2.7", "<script>")).headers.get("x-request-id")).not.toBe(
        "<script>",
      );
    } finally {
      delete process.env.TRUSTED_PROXIES;
      resetEnvCache();
    }
  });

  it("answers invalid params and query with 400 naming the field", async () => {
    const bad = await call(things, "/x", { params: { id: "nope" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/^id: /);
    const badQuery = await call(things, "/x?limit=1000", { params: { id: "t_1" } });
    expect(badQuery.status).toBe(400);
    expect(badQuery.json.error).toMatch(/^limit: /);
  });

  it("answers 201 with the parsed body", async () => {
    const res = await call(things, "/x", { method: "POST", body: { name: "a" } });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ created: "a" });
  });

  it("accepts a form-encoded body", async () => {
    const res = await call(things, "/x", {
      method: "POST",
      rawBody: "name=formed",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ created: "formed" });
  });

  it("answers malformed JSON with 400, not 500", async () => {
    const res = await call(things, "/x", {
      method: "POST",
      rawBody: '{"name": ',
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: "Malformed JSON body" });
  });

  it("answers a missing body and a wrong field type with 400", async () => {
    const missing = await call(things, "/x", { method: "POST" });
    expect(missing.status).toBe(400);
    expect(missing.json).toEqual({ error: "Request body is required" });
    const wrong = await call(things, "/x", { method: "POST", body: { name: 5 } });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error).toMatch(/^name: /);
  });

  it("answers a body over 1 MiB with 413, declared or streamed", async () => {
    const big = JSON.stringify({ name: "x".repeat(MAX_BODY_BYTES) });
    const declared = await call(things, "/x", {
      method: "POST",
      rawBody: big,
      headers: { "content-type": "application/json", "content-length": String(big.length) },
    });
    expect(declared.status).toBe(413);
    const streamed = await call(things, "/x", {
      method: "POST",
      rawBody: new TextEncoder().encode(big),
      headers: { "content-type": "application/json" },
    });
    expect(streamed.status).toBe(413);
    expect(streamed.json.error).toMatch(/1 MiB/);
  });

  it("answers a non-JSON content type with 415", async () => {
    const res = await call(things, "/x", {
      method: "POST",
      rawBody: "<xml/>",
      headers: { "content-type": "application/xml" },
    });
    expect(res.status).toBe(415);
  });

  it("answers an undeclared method with 405 and Allow", async () => {
    const res = await call(things, "/x", { method: "DELETE", params: { id: "t_1" } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST");
    expect(res.json.error).toContain("DELETE");
  });

  it("maps a DomainError to its status and message", async () => {
    const res = await call(things, "/x", { params: { id: "t_404" } });
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: "Thing not found" });
  });

  it("hides an unexpected error behind 500 without a stack or message", async () => {
    const res = await call(things, "/x", { params: { id: "t_500" } });
    expect(res.status).toBe(500);
    expect(res.json).toEqual({ error: "Internal server error" });
    expect(res.text).not.toContain("hunter2");
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });

  it("passes a thrown Response through", async () => {
    const res = await call(things, "/x", { params: { id: "t_302" } });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/");
  });
});

describe("unknown /api paths", () => {
  it.each(["GET", "POST", "PUT", "PATCH", "DELETE"])(
    "answer %s with a JSON 404",
    async (method) => {
      const res = await call(notFoundRoute, "/api/nope", { method, params: { "*": "nope" } });
      expect(res.status).toBe(404);
      expect(res.json).toEqual({ error: "No API endpoint at /api/nope" });
    },
  );
});
