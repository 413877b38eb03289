import { ws } from "msw";
import { afterEach, beforeAll, expect, it } from "vitest";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { recordSession, sweepSessions } from "../../worker/instances/recorder.ts";
import { recordBeforeSleep } from "../../worker/instances/sleep.ts";
import { mswServer } from "../msw/server.ts";
import { helloOk } from "./fake-gateway.ts";
import { agentUser } from "./support.ts";

// The soak (issue 52) lost a live-socket turn whose reply had started: the recorder's read of
// the session's history met OpenClaw's "session changed while reading history; reload the
// conversation" (UNAVAILABLE, retryable after 250 ms: a run's end overlapped the read), and
// nothing read it again before the agent went to sleep. A retryable refusal is now read again,
// a session that cannot be read no longer holds up the sweep's others, and a sleep records the
// sessions first (sleep-wake.test.ts, with the real gateway).

const URL = "ws://recorder-history.test:18789";
const CHANGED = {
  code: "UNAVAILABLE",
  message: "session changed while reading history; reload the conversation",
  details: { method: "chat.history" },
  retryable: true,
  retryAfterMs: 250,
};

/** A gateway whose sessions' histories are refused `refusals[key]` times (or always: -1). */
function gateway(
  histories: Record<string, string>,
  refusals: Record<string, number | { code: string; message: string }>,
) {
  const reads: string[] = [];
  mswServer.use(
    ws.link(URL).addEventListener("connection", ({ client }) => {
      client.send(
        JSON.stringify({
          type: "event",
          event: "connect.challenge",
          payload: { nonce: "n", ts: 1 },
        }),
      );
      client.addEventListener("message", (event) => {
        const frame = JSON.parse(String(event.data));
        const answer = (payload: unknown) =>
          client.send(JSON.stringify({ type: "res", id: frame.id, ok: true, payload }));
        const refuse = (error: unknown) =>
          client.send(JSON.stringify({ type: "res", id: frame.id, ok: false, error }));
        if (frame.method === "connect") return client.send(helloOk(frame, "c1"));
        if (frame.method === "sessions.list") {
          return answer({
            sessions: Object.keys(histories).map((key) => ({ key, updatedAt: 1 })),
          });
        }
        if (frame.method !== "chat.history") return;
        const key = frame.params.sessionKey as string;
        reads.push(key);
        const refusal = refusals[key];
        if (typeof refusal === "object") return refuse(refusal);
        if (typeof refusal === "number" && refusal > 0) {
          refusals[key] = refusal - 1;
          return refuse(CHANGED);
        }
        answer({
          messages: [
            { role: "user", content: histories[key], __openclaw: { id: `${key}-u` } },
            { role: "assistant", content: "noted", __openclaw: { id: `${key}-a` } },
          ],
        });
      });
    }),
  );
  return reads;
}

let user: { id: string };
let agentId: string;
beforeAll(async () => {
  user = await agentUser("solo");
  agentId = (await createAgentRecord(user.id, { name: "Bot", model: "openai/gpt-4o-mini" })).id;
});
afterEach(() => mswServer.resetHandlers());

async function connected(): Promise<GatewayClient> {
  const client = new GatewayClient({ url: URL, token: "t" });
  await client.connect();
  return client;
}

const recordedUserMessages = async () =>
  (
    await db()<{ content: string }[]>`
      select content from agent_messages where agent_id = ${agentId} and sender = 'user'
      order by content`
  ).map((m) => m.content);

it("reads a history again that the gateway refused while the session changed", async () => {
  const reads = gateway({ "agent:main:s1": "turn one" }, { "agent:main:s1": 2 });
  const client = await connected();
  try {
    expect(await recordSession(client, { user_id: user.id }, "agent:main:s1")).toBe(2);
  } finally {
    client.close();
  }
  expect(reads).toEqual(["agent:main:s1", "agent:main:s1", "agent:main:s1"]);
  expect(await recordedUserMessages()).toContain("turn one");
});

it("records the sweep's other sessions when one cannot be read, and tries that one again", async () => {
  const broken = { code: "INVALID_REQUEST", message: "session store unreadable" };
  const refusals: Record<string, number | typeof broken> = { "agent:main:s2": broken };
  gateway({ "agent:main:s2": "turn two", "agent:main:s3": "turn three" }, refusals);
  const client = await connected();
  const seen = new Map<string, unknown>();
  try {
    const w = { client, row: { user_id: user.id } as never, seen };
    await expect(sweepSessions(w)).rejects.toThrow("session store unreadable");
    expect(await recordedUserMessages()).toContain("turn three");
    expect([...seen.keys()]).toEqual(["agent:main:s3"]);
    // Readable again: the next sweep records it (it was not marked seen).
    delete refusals["agent:main:s2"];
    expect(await sweepSessions(w)).toBe(2);
    expect(await recordedUserMessages()).toContain("turn two");
  } finally {
    client.close();
  }
});

it("keeps an agent awake for the next pass when its sessions cannot be recorded, not for good", async () => {
  const broken = { code: "INVALID_REQUEST", message: "session store unreadable" };
  const refusals: Record<string, number | typeof broken> = { "agent:main:s4": broken };
  const reads = gateway({ "agent:main:s4": "turn four" }, refusals);
  const client = await connected();
  const row = { id: `sleep-record-${agentId}`, user_id: user.id };
  try {
    // Each pass sweeps again before it gives up; two passes keep it awake, the third lets it go.
    expect(await recordBeforeSleep(row, client, false)).toBe(false);
    expect(reads).toHaveLength(3);
    expect(await recordBeforeSleep(row, client, false)).toBe(false);
    expect(await recordBeforeSleep(row, client, false)).toBe(true);
    // The count starts again: a failure keeps it awake once more, except while memory is tight.
    expect(await recordBeforeSleep(row, client, false)).toBe(false);
    expect(await recordBeforeSleep(row, client, true)).toBe(true);
    // Readable again: recorded, and the sleep goes on at once.
    delete refusals["agent:main:s4"];
    expect(await recordBeforeSleep(row, client, false)).toBe(true);
    expect(await recordedUserMessages()).toContain("turn four");
  } finally {
    client.close();
  }
});
