import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { attachLiveSocket, openLiveSockets } from "../../app/server/agents/live-socket.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { uniqueUserId } from "./support.ts";

// The per-person cap on live agent sockets (issue 53, decision 0220): one socket past
// LIVE_SOCKETS_PER_USER is answered 429 {error} before its upgrade, the slot comes back when a
// socket closes, a refused credential takes no slot, and each person has a budget of their own.

const CAP = 3;
let server: Server;
let base: string;
const sockets: WebSocket[] = [];

type Opened = { ws: WebSocket } | { status: number; body: unknown } | { code: number };

/** Opens /agent/<id>: the socket once `ready`, the HTTP refusal, or the close code. */
function open(userId: string, headers: Record<string, string>): Promise<Opened> {
  const ws = new WebSocket(`ws://${base}/agent/${userId}`, { headers });
  sockets.push(ws);
  return new Promise((resolve) => {
    ws.on("message", (data) => {
      if (JSON.parse(String(data)).type === "ready") resolve({ ws });
    });
    ws.on("close", (code) => resolve({ code }));
    ws.on("unexpected-response", (_req, res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    ws.on("error", () => {});
  });
}

async function person() {
  const id = uniqueUserId("usr_cap");
  await ensureUser(id);
  return { id, cookie: await sessionCookieFor(id), key: (await createApiKey(id, "cap")).key };
}

const closeAndWait = (ws: WebSocket) =>
  new Promise<void>((resolve) => {
    ws.once("close", () => resolve());
    ws.close();
  });

beforeAll(async () => {
  process.env.LIVE_SOCKETS_PER_USER = String(CAP);
  resetEnvCache();
  server = createServer((_req, res) => res.writeHead(404).end());
  attachLiveSocket(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  for (const ws of sockets.splice(0)) ws.terminate();
  await expect.poll(() => openLiveSockets()).toBe(0);
});
afterAll(async () => {
  delete process.env.LIVE_SOCKETS_PER_USER;
  resetEnvCache();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("live sockets per person", () => {
  it("refuses one past the cap with 429 {error} before the upgrade, and frees a slot on close", async () => {
    const me = await person();
    const held: WebSocket[] = [];
    for (let i = 0; i < CAP; i++) {
      // Cookie and API key count alike: the cap is the person's.
      const got = await open(
        me.id,
        i % 2 ? { authorization: `Bearer ${me.key}` } : { cookie: me.cookie },
      );
      if (!("ws" in got)) throw new Error(`refused: ${JSON.stringify(got)}`);
      held.push(got.ws);
    }
    expect(openLiveSockets()).toBe(CAP);
    expect(await open(me.id, { authorization: `Bearer ${me.key}` })).toEqual({
      status: 429,
      body: { error: `Too many open live sockets: at most ${CAP} per user` },
    });
    expect(openLiveSockets()).toBe(CAP);

    await closeAndWait(held[0] as WebSocket);
    await expect.poll(() => openLiveSockets()).toBe(CAP - 1);
    const again = await open(me.id, { cookie: me.cookie });
    expect("ws" in again).toBe(true);
  });

  it("gives each person a budget of their own, and none to a refused credential", async () => {
    const me = await person();
    const other = await person();
    for (let i = 0; i < CAP; i++) {
      expect("ws" in (await open(me.id, { cookie: me.cookie }))).toBe(true);
    }
    expect(await open(other.id, { cookie: other.cookie })).toMatchObject({ ws: expect.anything() });
    // Someone else's agents and a bad key are refused by close code and hold nothing.
    expect(await open(other.id, { cookie: me.cookie })).toEqual({ code: 4404 });
    expect(await open(me.id, { authorization: "Bearer sk_nope" })).toEqual({ code: 4401 });
    expect(openLiveSockets()).toBe(CAP + 1);
  });

  it("frees the slot of a client that drops its connection without a close frame", async () => {
    const me = await person();
    const got = await open(me.id, { cookie: me.cookie });
    if (!("ws" in got)) throw new Error("refused");
    expect(openLiveSockets()).toBe(1);
    got.ws.terminate();
    await expect.poll(() => openLiveSockets()).toBe(0);
  });
});
