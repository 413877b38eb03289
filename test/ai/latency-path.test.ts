import { once } from "node:events";
import {
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import type { ServerBuild } from "@remix-run/node";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { issueInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering, meter } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { createWebServer } from "../../app/server/platform/web/web-server.server.ts";
import { configureAi, giveCredits } from "./support.ts";

// The agents' endpoint through the real web server (the /api fast path, node-http's side
// channels) and the node:http provider hop, against a local OpenAI-compatible provider: bodies
// byte for byte, streams chunk by chunk as the provider sends them, a client that goes away
// cancelling the provider call, and one kept-alive provider connection for sequential calls.

const created = 1_750_000_000;
const usage = { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 };
// Spacing no serialiser would produce: proves the answer is passed on as received.
const completion = `{"id":"chatcmpl-1",  "object":"chat.completion","created":${created},"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":${JSON.stringify(usage)}}`;
const chunk = (delta: object, extra: object = {}) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created, model: "gpt-4o-mini", choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;

interface Provider {
  server: Server;
  url: string;
  connections: number;
  /** Requests to /chat/completions, with their bodies. */
  calls: Array<{ body: Record<string, unknown>; req: IncomingMessage; res: ServerResponse }>;
  /** Streams wait for this to write more than their first chunk (undefined: write at once). */
  release?: Promise<void>;
  /** JSON answers wait for this (undefined: answer at once). */
  holdJson?: Promise<void>;
}

const provider: Provider = {
  server: createServer(),
  url: "",
  connections: 0,
  calls: [],
};

provider.server.on("connection", () => {
  provider.connections += 1;
});
provider.server.on("request", (req, res) => {
  if (req.method === "GET" && req.url?.endsWith("/models")) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ object: "list", data: [{ id: "gpt-4o-mini", object: "model" }] }));
    return;
  }
  const parts: Buffer[] = [];
  req.on("data", (c: Buffer) => parts.push(c));
  req.on("end", async () => {
    const body = JSON.parse(Buffer.concat(parts).toString("utf8")) as Record<string, unknown>;
    provider.calls.push({ body, req, res });
    if (!body.stream) {
      if (provider.holdJson) await provider.holdJson;
      if (res.destroyed) return;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(completion);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(chunk({ role: "assistant", content: "Hel" }));
    if (provider.release) await provider.release;
    if (res.destroyed) return;
    res.write(chunk({ content: "lo" }));
    res.write(`data: ${JSON.stringify({ id: "chatcmpl-1", choices: [], usage })}\n\n`);
    res.end("data: [DONE]\n\n");
  });
});

// The web server with one route, as the build would give it.
const build = {
  routes: {
    root: { id: "root", path: "", module: {} },
    completions: {
      id: "completions",
      parentId: "root",
      path: "api/ai/v1/chat/completions",
      module: completionsRoute,
    },
  },
} as unknown as ServerBuild;
const web = createWebServer({ build, publicDir: "/nonexistent" });
let webUrl = "";

beforeAll(async () => {
  provider.server.listen(0, "127.0.0.1");
  web.listen(0, "127.0.0.1");
  await Promise.all([once(provider.server, "listening"), once(web, "listening")]);
  provider.url = `http://127.0.0.1:${(provider.server.address() as AddressInfo).port}`;
  webUrl = `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
});

afterAll(async () => {
  web.closeAllConnections();
  provider.server.closeAllConnections();
  await Promise.all([
    new Promise((r) => web.close(r)),
    new Promise((r) => provider.server.close(r)),
  ]);
});

let seq = 0;
let userId: string;
let token: string;

beforeEach(async () => {
  await configureAi({ OPENAI_BASE_URL: `${provider.url}/v1`, OPENAI_API_KEY: "local" });
  provider.calls = [];
  provider.release = undefined;
  provider.holdJson = undefined;
  seq += 1;
  userId = `usr_latency_${seq}`;
  token = await issueInstanceToken(userId, `ins_latency_${seq}`);
  await giveCredits(userId, 1_000_000);
});

const body = (stream: boolean) =>
  JSON.stringify({
    model: "openai/gpt-4o-mini",
    messages: [{ role: "user", content: "Say hello" }],
    stream,
  });

/** A raw node:http call to the web server (the same transport a gateway uses). */
function post(payload: string, headers: Record<string, string> = {}) {
  return new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${webUrl}/api/ai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
    });
    req.on("response", resolve).on("error", reject);
    req.end(payload);
  });
}

async function readAll(res: IncomingMessage): Promise<string> {
  let text = "";
  for await (const c of res) text += (c as Buffer).toString("utf8");
  return text;
}

async function usageRows() {
  await flushMetering();
  return db()<
    { status: string; prompt_tokens: number; completion_tokens: number; error: string }[]
  >`
    select status, prompt_tokens, completion_tokens, error from ai_usage where user_id = ${userId}`;
}

describe("the agents' endpoint through the web server", () => {
  it("passes an OpenAI-compatible JSON answer on byte for byte, with x-overhead-ms, and meters it", async () => {
    const res = await post(body(false), {
      "content-length": String(Buffer.byteLength(body(false))),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-length"]).toBe(String(Buffer.byteLength(completion)));
    expect(Number(res.headers["x-overhead-ms"])).toBeGreaterThanOrEqual(0);
    expect(await readAll(res)).toBe(completion);
    expect(provider.calls[0]?.body.model).toBe("gpt-4o-mini");
    expect(await usageRows()).toMatchObject([
      { status: "ok", prompt_tokens: 12, completion_tokens: 9 },
    ]);
  });

  it("reads a body sent without a length (chunked) too", async () => {
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(`${webUrl}/api/ai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      });
      req.on("response", resolve).on("error", reject);
      const text = body(false);
      req.write(text.slice(0, 10));
      req.end(text.slice(10));
    });
    expect(res.statusCode).toBe(200);
    expect(await readAll(res)).toBe(completion);
  });

  it("answers a GET that declares an empty body like any GET (405 here, not a crash)", async () => {
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(`${webUrl}/api/ai/v1/chat/completions`, {
        headers: { "content-length": "0" },
      });
      req.on("response", resolve).on("error", reject);
      req.end();
    });
    expect(res.statusCode).toBe(405);
    expect(JSON.parse(await readAll(res))).toEqual({ error: "Method GET not allowed" });
  });

  it("answers 400 {error} for malformed JSON read off the socket", async () => {
    const bad = await post("{not json");
    expect(bad.statusCode).toBe(400);
    expect(JSON.parse(await readAll(bad))).toEqual({ error: "Malformed JSON body" });
  });

  it("streams each event on as the provider sends it and meters the stream from its usage chunk", async () => {
    let release!: () => void;
    provider.release = new Promise<void>((r) => {
      release = r;
    });
    const res = await post(body(true));
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(res.headers["x-overhead-ms"]).toBeDefined();
    // The first event arrives while the provider still holds the rest back.
    const first = await new Promise<string>((resolve) =>
      res.once("data", (c: Buffer) => resolve(c.toString("utf8"))),
    );
    expect(first).toBe(chunk({ role: "assistant", content: "Hel" }));
    release();
    const rest = await readAll(res);
    expect(rest).toContain(chunk({ content: "lo" }));
    expect(rest.endsWith("data: [DONE]\n\n")).toBe(true);
    // The layer asked the provider for the usage chunk.
    expect(provider.calls[0]?.body.stream_options).toEqual({ include_usage: true });
    expect(await usageRows()).toMatchObject([
      { status: "ok", prompt_tokens: 12, completion_tokens: 9 },
    ]);
  });

  it("cancels the provider call when the client goes away mid-stream, and meters what it got", async () => {
    provider.release = new Promise<void>(() => {}); // the provider never finishes on its own
    const res = await post(body(true));
    await once(res, "data");
    const upstream = provider.calls[0]!;
    const closed = once(upstream.res, "close");
    res.destroy();
    await closed; // the provider's side of the call was torn down
    await expect.poll(usageRows).toMatchObject([{ status: "ok", error: "client disconnected" }]);
  });

  it("cancels the provider call when the client goes away before a JSON answer", async () => {
    provider.holdJson = new Promise<void>(() => {}); // the provider never answers on its own
    const req = request(`${webUrl}/api/ai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    });
    req.on("error", () => {});
    req.end(body(false));
    await expect.poll(() => provider.calls.length).toBe(1);
    const closed = once(provider.calls[0]!.res, "close");
    req.destroy();
    await closed; // request.signal fired: the provider's side of the call was torn down
    await expect.poll(usageRows).toMatchObject([{ status: "error", error: "client disconnected" }]);
  });

  it("reuses one kept-alive provider connection for sequential calls", async () => {
    const before = provider.connections;
    for (let i = 0; i < 5; i++) {
      const res = await post(body(i % 2 === 1));
      expect(res.statusCode).toBe(200);
      await readAll(res);
    }
    expect(provider.calls).toHaveLength(5);
    expect(provider.connections - before).toBeLessThanOrEqual(1);
  });
});

describe("the fast path's side tables", () => {
  it("are shared by two loaded copies of node-http (server entry from source, routes bundled)", async () => {
    const source = await import("../../app/server/platform/web/node-http.server.ts");
    const bundled = (await import(
      /* @vite-ignore */ `${new URL("../../app/server/platform/web/node-http.server.ts", import.meta.url).href}?copy=bundle`
    )) as typeof source;
    expect(bundled).not.toBe(source);
    const response = bundled.withRawBody(new Response('{"a":1}'), '{"a":1}');
    const server = createServer((_req, res) => void source.sendResponse(res, response, false));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect(await res.text()).toBe('{"a":1}');
      expect(res.headers.get("content-length")).toBe("7");
      // Sent from the side table: the Response's own stream was never read.
      expect(response.bodyUsed).toBe(false);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("metering under a burst", () => {
  it("records every call when thousands queue up during one flush (bounded batches)", async () => {
    const instanceId = `ins_burst_${Date.now()}`;
    const calls = Array.from({ length: 5000 }, () =>
      meter({
        userId: null,
        instanceId,
        endpoint: "agents",
        provider: "openai",
        model: "openai/gpt-4o-mini",
        promptTokens: 1,
        completionTokens: 1,
        tokensEstimated: false,
        costMicroUsd: 0,
        billingMode: "none",
        stream: false,
        latencyMs: 1,
        status: "ok",
        httpStatus: 200,
        error: null,
      }),
    );
    await flushMetering();
    const ids = await Promise.all(calls);
    expect(ids.every((id) => typeof id === "string")).toBe(true);
    const [row] = await db()<{ n: number }[]>`
      select count(*)::int as n from ai_usage where instance_id = ${instanceId}`;
    expect(row?.n).toBe(5000);
  });
});
