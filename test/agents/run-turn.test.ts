import { ws } from "msw";
import { afterEach, describe, expect, it, vi } from "vitest";
import { runTurn, TURN_DROP_GRACE_MS } from "../../app/server/agents/talk.server.ts";
import { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { DomainError } from "../../app/server/platform/errors.server.ts";
import { mswServer } from "../msw/server.ts";
import { helloOk } from "./fake-gateway.ts";

// One chat turn against a protocol-level fake gateway whose runs end with the errors OpenClaw
// 2026.9.x gives for its own transients (a config reload during the run's preparation, the
// state database changing hands): the turn is sent again, at most twice, and only when nothing
// was streamed. A gateway draining for a restart, or refusing connections while it restarts, is
// waited for. The real gateway's runs are covered by talk-real.test.ts.

const URL = "ws://run-turn.test:18789";
const SUPERSEDED =
  "Error: prepared model runtime plugin generation was superseded for /state/agents/main/agent";

/** A fake whose n-th run (from 0) ends as `runs[n]` says. */
function fakeGateway(
  runs: Array<{
    error?: string;
    delta?: string;
    reply?: string;
    drop?: boolean;
    /** Takes the message, then its socket closes and it never answers again (killed). */
    vanish?: boolean;
    /** Takes the message, its socket closes; the run's reply reaches the next connection. */
    blip?: string;
    /** Takes the message and never answers the request (a gateway too busy to). */
    silent?: boolean;
  }>,
  { refuse = 0 }: { refuse?: number } = {},
) {
  const sent: string[] = [];
  let connections = 0;
  let gone = false;
  let pendingFinal: string | undefined;
  mswServer.use(
    ws.link(URL).addEventListener("connection", ({ client }) => {
      // Restarting in place: the first connections are closed before the handshake.
      if (connections++ < refuse || gone) return client.close();
      client.send(
        JSON.stringify({
          type: "event",
          event: "connect.challenge",
          payload: { nonce: "n", ts: 1 },
        }),
      );
      let restarting = false;
      client.addEventListener("message", (event) => {
        if (restarting) return client.close();
        const frame = JSON.parse(String(event.data));
        if (frame.method === "connect") {
          client.send(helloOk(frame, "c1"));
          if (pendingFinal) client.send(pendingFinal);
          pendingFinal = undefined;
          return;
        }
        if (frame.method !== "chat.send") return;
        const runId = frame.params.idempotencyKey as string;
        const run = runs[sent.length] ?? { reply: "late" };
        sent.push(frame.params.message as string);
        if (run.silent) return;
        client.send(JSON.stringify({ type: "res", id: frame.id, ok: true, payload: { runId } }));
        if (run.vanish || run.blip) {
          gone = !!run.vanish;
          if (run.blip) {
            pendingFinal = JSON.stringify({
              type: "event",
              event: "chat",
              payload: { runId, state: "final", message: { content: run.blip } },
            });
          }
          // After the ack has reached the platform (msw delivers a close before queued frames).
          setImmediate(() => client.close());
          return;
        }
        const chat = (payload: Record<string, unknown>) =>
          client.send(
            JSON.stringify({ type: "event", event: "chat", payload: { runId, ...payload } }),
          );
        if (run.delta) chat({ state: "delta", deltaText: run.delta });
        if (run.error) chat({ state: "error", errorMessage: run.error });
        else chat({ state: "final", message: { content: run.reply ?? "" } });
        // Restarting in place: the next frame on this socket finds it closed.
        if (run.drop) restarting = true;
      });
    }),
  );
  return sent;
}

async function turn(): Promise<string> {
  const client = new GatewayClient({ url: URL, token: "t" });
  try {
    await client.connect();
    return (await runTurn(client, "agent:main:main", "hello")).reply;
  } finally {
    client.close();
  }
}

afterEach(() => {
  vi.useRealTimers();
  mswServer.resetHandlers();
});

describe("a chat turn whose run the gateway ends with a transient error", () => {
  it("is sent again after a config reload superseded it, and answered", async () => {
    const sent = fakeGateway([{ error: SUPERSEDED }, { reply: "Hi there" }]);
    expect(await turn()).toBe("Hi there");
    expect(sent).toEqual(["hello", "hello"]);
  });

  it("gives up after two resends with the gateway's error", async () => {
    const contention = "StateDatabaseCoordinatorContentionError: another OpenClaw process owns it";
    const sent = fakeGateway([{ error: contention }, { error: SUPERSEDED }, { error: SUPERSEDED }]);
    await expect(turn()).rejects.toThrow(/superseded/);
    expect(sent).toHaveLength(3);
  });

  it("is not sent again once text was streamed, nor for another error", async () => {
    const streamed = fakeGateway([{ delta: "Hal", error: SUPERSEDED }]);
    await expect(turn()).rejects.toThrow(/superseded/);
    expect(streamed).toHaveLength(1);
    mswServer.resetHandlers();
    const other = fakeGateway([{ error: "model refused" }]);
    await expect(turn()).rejects.toThrow(/model refused/);
    expect(other).toHaveLength(1);
  });

  it("is sent again once a gateway that drained for a restart is back", async () => {
    const draining = "Gateway is draining; new tasks are not accepted";
    const sent = fakeGateway([{ error: draining, drop: true }, { reply: "Awake" }]);
    expect(await turn()).toBe("Awake"); // the resend on the closed socket waited for the next
    expect(sent).toEqual(["hello", "hello"]);
  });

  it("connects again while a gateway that just restarted refuses, then sends once", async () => {
    const sent = fakeGateway([{ reply: "Back" }], { refuse: 2 });
    const client = new GatewayClient({ url: URL, token: "t", reconnect: false });
    try {
      expect((await runTurn(client, "agent:main:main", "hello")).reply).toBe("Back");
    } finally {
      client.close();
    }
    expect(sent).toEqual(["hello"]);
  });
});

describe("a chat turn whose gateway connection drops after the message was taken", () => {
  it("ends after the grace when the connection does not come back (the gateway was killed)", async () => {
    fakeGateway([{ vanish: true }]);
    const client = new GatewayClient({ url: URL, token: "t", reconnect: true });
    await client.connect();
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const outcome = runTurn(client, "agent:main:main", "hello").catch((e: unknown) => e);
      // The ack, then the drop (setImmediate is not faked); then the grace passes.
      while (client.connected) await new Promise((r) => setImmediate(r));
      await vi.advanceTimersByTimeAsync(TURN_DROP_GRACE_MS + 1);
      const error = await outcome;
      expect(error).toBeInstanceOf(DomainError);
      expect(error).toMatchObject({
        status: 502,
        extra: { delivered: true },
        message: expect.stringContaining("dropped during the turn"),
      });
    } finally {
      client.close();
    }
  });

  it("keeps waiting when the connection comes back, and gets the run's reply on it", async () => {
    fakeGateway([{ blip: "Still here" }]);
    const client = new GatewayClient({ url: URL, token: "t", reconnect: true });
    await client.connect();
    try {
      expect((await runTurn(client, "agent:main:main", "hello")).reply).toBe("Still here");
    } finally {
      client.close();
    }
  });
});

describe("a chat turn whose send goes unanswered", () => {
  it("fails saying its delivery is unknown, and is not sent again (decision 0246)", async () => {
    const sent = fakeGateway([{ silent: true }, { reply: "twice" }]);
    const client = new GatewayClient({ url: URL, token: "t", requestTimeoutMs: 200 });
    await client.connect();
    try {
      const error = await runTurn(client, "agent:main:main", "hello").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DomainError);
      expect(error).toMatchObject({
        status: 502,
        extra: { delivered: "unknown" },
        message: expect.stringContaining("chat.send: no response within 200 ms"),
      });
    } finally {
      client.close();
    }
    expect(sent).toEqual(["hello"]);
  });
});
