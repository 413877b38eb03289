import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import * as eventsRoute from "../../app/routes/api.agents.$id.events.ts";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import * as signoutRoute from "../../app/routes/api.auth.signout.ts";
import * as skillRoute from "../../app/routes/api.skills.$name.ts";
import { createApiKey, deleteApiKey } from "../../app/server/accounts/api-keys.server.ts";
import {
  credentialChanges,
  credentialWatchers,
} from "../../app/server/accounts/credential-watch.server.ts";
import { resetPassword } from "../../app/server/accounts/password-reset.server.ts";
import { createSession, revokeSession } from "../../app/server/accounts/sessions.server.ts";
import { mayStillUse } from "../../app/server/agents/live-access.server.ts";
import { attachLiveSocket, MAX_PENDING_TURNS } from "../../app/server/agents/live-socket.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { suspendUser } from "../../app/server/ops/users.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sha256 } from "../../app/server/platform/ids.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";
import { ensureUser } from "../helpers/users.ts";
import { createFakeGateway, pairedInstanceAt } from "./fake-gateway.ts";
import { subscribe, uniqueUserId } from "./support.ts";

// Finding 2 of issue 47 (decision 0198): a live agent socket or an event stream lives only as
// long as its credential. The credentials channel's NOTIFY closes it at once (the backstop
// recheck is set to a minute here, so only the notification can close it within the test),
// and the backstop alone closes it when no notification comes. The gateway is the protocol
// fake; the socket is served on loopback.

const fake = createFakeGateway();
let server: Server;
let base: string;

type Frame = Record<string, unknown>;
const sockets: WebSocket[] = [];

function openSocket(userId: string, headers: Record<string, string>) {
  const ws = new WebSocket(`ws://${base}/agent/${userId}`, { headers });
  sockets.push(ws);
  const frames: Frame[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })),
  );
  ws.on("message", (data) => frames.push(JSON.parse(String(data))));
  /** The frame that ends turn `id`: its final or its error. */
  const ended = (id: string) =>
    frames.find((f) => f.id === id && (f.type === "final" || f.type === "error"));
  const ready = new Promise<void>((resolve, reject) => {
    ws.on("message", (data) => {
      if (JSON.parse(String(data)).type === "ready") resolve();
    });
    ws.on("close", (code) => reject(new Error(`closed ${code} before ready`)));
  });
  return { ws, frames, closed, ready, ended };
}

/** A user with a paired (fake) gateway, a fresh session and an API key. */
async function owner() {
  const id = uniqueUserId("usr_live");
  await ensureUser(id);
  await pairedInstanceAt(id);
  const session = await createSession(id);
  const cookie = session.setCookie.split(";")[0] as string;
  const [row] = await db()<{ id: string }[]>`
    select id from sessions where user_id = ${id} order by created_at desc limit 1`;
  const apiKey = await createApiKey(id, "live tests");
  return { id, cookie, sessionId: row?.id as string, key: apiKey.key, keyId: apiKey.id };
}

const REVOKED = { code: 4401, reason: "credential revoked" };

function setRecheck(ms: number) {
  process.env.LIVE_RECHECK_MS = String(ms);
  resetEnvCache();
}

beforeAll(async () => {
  process.env.AGENT_PROVISION_WAIT_MS = "0"; // no worker: a new agent stays provisioning
  setRecheck(60_000);
  server = createServer((_req, res) => res.writeHead(404).end());
  attachLiveSocket(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
beforeEach(() => {
  fake.use();
  resetRateLimiters();
});
afterEach(async () => {
  for (const ws of sockets.splice(0)) ws.terminate();
  // Every watcher is gone once its connection is: nothing keeps checking a closed socket.
  await expect.poll(() => credentialWatchers()).toBe(0);
  setRecheck(60_000);
});
afterAll(async () => {
  closeGatewayClients();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("the live agent socket closes when its credential goes", () => {
  it("on sign-out", async () => {
    const user = await owner();
    const live = openSocket(user.id, { cookie: user.cookie });
    await live.ready;
    const res = await call(signoutRoute, "/api/auth/signout", {
      method: "POST",
      headers: { cookie: user.cookie },
    });
    expect(res.status).toBe(200);
    expect(await live.closed).toEqual(REVOKED);
  });

  it("when the session is revoked from elsewhere", async () => {
    const user = await owner();
    const live = openSocket(user.id, { cookie: user.cookie });
    await live.ready;
    expect(await revokeSession(user.id, user.sessionId)).toBe(true);
    expect(await live.closed).toEqual(REVOKED);
  });

  it("when its API key is deleted (and a session socket of the same user stays)", async () => {
    const user = await owner();
    const byKey = openSocket(user.id, { authorization: `Bearer ${user.key}` });
    const bySession = openSocket(user.id, { cookie: user.cookie });
    await Promise.all([byKey.ready, bySession.ready]);
    await deleteApiKey(user.id, user.keyId);
    expect(await byKey.closed).toEqual(REVOKED);
    // The session socket still chats.
    bySession.ws.send(JSON.stringify({ type: "chat", id: "s1", message: "Still here?" }));
    await expect
      .poll(() => bySession.ended("s1"))
      .toMatchObject({ type: "final", reply: "Hello from the fake" });
    bySession.ws.close();
    await bySession.closed;
  });

  it("on a password reset", async () => {
    const user = await owner();
    const live = openSocket(user.id, { cookie: user.cookie });
    await live.ready;
    const token = `reset-${user.id}`;
    await db()`insert into password_reset_tokens (token_hash, user_id, expires_at)
      values (${sha256(token)}, ${user.id}, now() + interval '1 hour')`;
    await resetPassword(token, "a new long password 123");
    expect(await live.closed).toEqual(REVOKED);
  });

  it("when an operator suspends the user (an API key socket: keys are not deleted)", async () => {
    const user = await owner();
    const operator = uniqueUserId("usr_live_op");
    await ensureUser(operator);
    const live = openSocket(user.id, { authorization: `Bearer ${user.key}` });
    await live.ready;
    await suspendUser(operator, user.id, "abuse");
    expect(await live.closed).toEqual(REVOKED);
  });

  it("by the periodic recheck alone when no notification comes", async () => {
    const user = await owner();
    setRecheck(100);
    const live = openSocket(user.id, { cookie: user.cookie });
    await live.ready;
    // A revocation the credentials channel does not carry (its trigger off in this file's
    // database): only the backstop can see it.
    await db().begin(async (t) => {
      await t`alter table sessions disable trigger sessions_notify_credentials`;
      await t`update sessions set revoked_at = now() where id = ${user.sessionId}`;
      await t`alter table sessions enable trigger sessions_notify_credentials`;
    });
    expect(await live.closed).toEqual(REVOKED);
  });
});

describe("the rechecks of many connections (issue 53, decision 0220)", () => {
  it("share one check per credential, but never one begun before a change was heard", async () => {
    const user = await owner();
    const live = openSocket(user.id, { cookie: user.cookie }); // the listener runs
    await live.ready;
    const credential = { userId: user.id, via: "session" as const, sessionId: user.sessionId };
    const target = { ownerId: user.id };
    // A backstop sweep asks every connection at once: one check answers them all.
    const first = mayStillUse(credential, target);
    expect(mayStillUse(credential, target)).toBe(first);
    expect(mayStillUse({ ...credential, sessionId: "ses_other" }, target)).not.toBe(first);
    expect(await first).toBe(true);

    // A check held in flight (its query waits on a lock) while the session is revoked.
    const holder = await db().reserve();
    await holder`begin`;
    await holder`lock table users in access exclusive mode`;
    const heard = credentialChanges();
    const before = mayStillUse(credential, target);
    await db()`update sessions set revoked_at = now() where id = ${user.sessionId}`;
    await expect.poll(() => credentialChanges()).toBeGreaterThan(heard);
    // Asked because of the revocation: a check of its own, which sees it.
    const after = mayStillUse(credential, target);
    expect(after).not.toBe(before);
    await holder`commit`;
    holder.release();
    expect(await after).toBe(false);
    await before;
    expect(await live.closed).toEqual(REVOKED);
  });
});

describe("the live socket's queue of turns", () => {
  it(`holds at most ${MAX_PENDING_TURNS} pending turns and refuses the next with an error frame`, async () => {
    const user = await owner();
    const live = openSocket(user.id, { cookie: user.cookie });
    await live.ready;
    fake.state.hold = true;
    try {
      const total = MAX_PENDING_TURNS + 2;
      for (let i = 1; i <= total; i++) {
        live.ws.send(JSON.stringify({ type: "chat", id: `t${i}`, message: `turn ${i}` }));
      }
      // The two over the bound are refused by id, at once, while the first still runs.
      for (const id of [`t${MAX_PENDING_TURNS + 1}`, `t${total}`]) {
        await expect
          .poll(() => live.ended(id))
          .toEqual({
            type: "error",
            id,
            status: 429,
            error: `Too many pending turns: at most ${MAX_PENDING_TURNS} per socket`,
          });
      }
      // Nothing is dropped: every accepted turn is answered in order as the gateway ends it.
      for (let i = 1; i <= MAX_PENDING_TURNS; i++) {
        await expect.poll(() => fake.state.held.length).toBeGreaterThan(0);
        fake.state.held.shift()?.();
        await expect.poll(() => live.ended(`t${i}`)).toMatchObject({ type: "final" });
      }
      // With the queue drained, a new turn is taken again.
      live.ws.send(JSON.stringify({ type: "chat", id: "again", message: "one more" }));
      await expect.poll(() => fake.state.held.length).toBe(1);
      fake.state.held.shift()?.();
      await expect.poll(() => live.ended("again")).toMatchObject({ type: "final" });
      const finals = live.frames.filter((f) => f.type === "final").map((f) => f.id);
      expect(finals).toEqual([
        ...Array.from({ length: MAX_PENDING_TURNS }, (_, i) => `t${i + 1}`),
        "again",
      ]);
    } finally {
      fake.state.hold = false;
      for (const end of fake.state.held.splice(0)) end();
      live.ws.close();
      await live.closed;
    }
  });
});

describe("the agent's progress event stream ends when its credential goes", () => {
  async function provisioning(paired = false) {
    const id = uniqueUserId("usr_live_sse");
    await subscribe(id, "solo");
    const session = await createSession(id);
    const cookie = session.setCookie.split(";")[0] as string;
    const res = await call(provisionRoute, "/api/agents/provision", {
      method: "POST",
      body: { name: "Helper" },
      headers: { cookie },
    });
    expect(res.status).toBe(201);
    if (paired) await pairedInstanceAt(id);
    return { id, cookie, agentId: res.json.agent.id as string };
  }

  /** The progress stream's events as they come; `ended` resolves when the server ends it. */
  async function openStream(cookie: string, agentId: string) {
    const abort = new AbortController();
    const response = await eventsRoute.loader({
      request: new Request(`http://localhost/api/agents/${agentId}/events`, {
        headers: { cookie },
        signal: abort.signal,
      }),
      params: { id: agentId },
      context: { remoteAddress: "127.0.0.1" },
    });
    return readEvents(response);
  }

  function readEvents(response: Response) {
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events: Array<{ event: string; data: Frame }> = [];
    if (!response.body) throw new Error("the stream has no body");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const ended = (async () => {
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += value;
        for (let i = buffer.indexOf("\n\n"); i >= 0; i = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) });
        }
      }
    })();
    return { events, ended };
  }

  it("on sign-out: an error event, then the end", async () => {
    const user = await provisioning();
    const stream = await openStream(user.cookie, user.agentId);
    await expect.poll(() => stream.events[0]?.event).toBe("progress");
    await call(signoutRoute, "/api/auth/signout", {
      method: "POST",
      headers: { cookie: user.cookie },
    });
    await stream.ended;
    expect(stream.events.at(-1)).toEqual({ event: "error", data: { error: "credential revoked" } });
    expect(stream.events.some((e) => e.event === "done")).toBe(false);
  });

  it("when the agent is no longer the user's", async () => {
    const user = await provisioning();
    setRecheck(100); // an agent row's change is not on the credentials channel: the backstop
    const stream = await openStream(user.cookie, user.agentId);
    await expect.poll(() => stream.events[0]?.event).toBe("progress");
    const other = uniqueUserId("usr_live_other");
    await ensureUser(other);
    await db()`update agents set user_id = ${other} where id = ${user.agentId}`;
    await stream.ended;
    expect(stream.events.at(-1)).toEqual({ event: "error", data: { error: "credential revoked" } });
  });

  it("a skill's streamed turn: an error event on sign-out, then the end", async () => {
    const user = await provisioning(true);
    fake.state.skills = [{ skillKey: "weather", name: "weather", bundled: true, eligible: true }];
    fake.state.hold = true; // the turn runs on while the credential goes
    try {
      const response = (await skillRoute.action({
        request: new Request("http://localhost/api/skills/weather", {
          method: "POST",
          headers: { cookie: user.cookie, "content-type": "application/json" },
          body: JSON.stringify({ input: "Rain tomorrow?", stream: true }),
        }),
        params: { name: "weather" },
        context: { remoteAddress: "127.0.0.1" },
      })) as Response;
      const stream = readEvents(response);
      await expect.poll(() => fake.state.held.length).toBe(1);
      await call(signoutRoute, "/api/auth/signout", {
        method: "POST",
        headers: { cookie: user.cookie },
      });
      await stream.ended;
      expect(stream.events).toEqual([{ event: "error", data: { error: "credential revoked" } }]);
    } finally {
      fake.state.hold = false;
      for (const end of fake.state.held.splice(0)) end();
      fake.state.skills = [];
    }
  });
});
