import v8 from "node:v8";
import vm from "node:vm";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as eventsRoute from "../../app/routes/api.agents.$id.events.ts";
import * as detailRoute from "../../app/routes/api.agents.$id.ts";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import {
  getInstanceByUser,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { openProgressStreams } from "../../app/server/agents/progress-events.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { startRun } from "../../worker/instances/run-progress.ts";
import { agentUser, asUser } from "./support.ts";

// Pushed progress (decision 0158): the event stream of GET /api/agents/:id/events, fed by the
// triggers' NOTIFY through this process's listener, as the worker's run helper records steps.

beforeAll(() => {
  process.env.AGENT_PROVISION_WAIT_MS = "0"; // no worker here
  process.env.PROGRESS_KEEPALIVE_MS = "60000"; // events here come from NOTIFY, not re-reads
  resetEnvCache();
});
beforeEach(() => resetRateLimiters());

async function provisioned() {
  const user = await agentUser("solo");
  const res = await asUser(user, provisionRoute, "/api/agents/provision", {
    method: "POST",
    body: { name: "Helper" },
  });
  expect(res.status).toBe(201);
  const instance = (await getInstanceByUser(user.id)) as InstanceRow;
  return { user, agentId: res.json.agent.id as string, instance };
}

interface Event {
  event: string;
  data: Record<string, unknown>;
}

/** Opens the stream as the user; events are collected as they come. */
async function openStream(user: { cookie: string }, agentId: string) {
  const abort = new AbortController();
  const response = await eventsRoute.loader({
    request: new Request(`http://localhost/api/agents/${agentId}/events`, {
      headers: { cookie: user.cookie },
      signal: abort.signal,
    }),
    params: { id: agentId },
    context: { remoteAddress: "127.0.0.1" },
  });
  const events: Event[] = [];
  let ended = false;
  if (response.body) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    void (async () => {
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: "" }));
        if (done) break;
        buffer += value;
        for (let i = buffer.indexOf("\n\n"); i >= 0; i = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) });
        }
      }
      ended = true;
    })();
  }
  return { response, events, ended: () => ended, close: () => abort.abort() };
}

/** The steps the progress events reached, in order (a run begun, a path known: same step). */
const steps = (events: Event[]) =>
  events
    .filter((e) => e.event === "progress")
    .map((e) => e.data.step as string | null)
    .filter((step, i, all) => i === 0 || step !== all[i - 1]);

describe("GET /api/agents/:id/events", () => {
  it("pushes each step of a provisioning in order, then done, and ends", async () => {
    const { user, agentId, instance } = await provisioned();
    const stream = await openStream(user, agentId);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    await expect.poll(() => steps(stream.events)).toEqual([null]);
    expect(stream.events[0]?.data).toMatchObject({ status: "provisioning", action: "provision" });

    // As the worker records them (worker/instances/provision.ts), each waited for on the stream.
    const run = await startRun(instance.id, "provision");
    await run.path("cold");
    const expected: Array<string | null> = [null];
    for (const step of ["container-created", "gateway-healthy", "paired", "warmed-up"] as const) {
      await run.step(step);
      expected.push(step);
      await expect.poll(() => steps(stream.events), { timeout: 5000 }).toEqual(expected);
    }
    await updateInstance(instance.id, { observed_state: "running", health: "healthy" });
    await run.step("ready");
    await expect.poll(() => stream.events.at(-1)?.event).toBe("done");
    await expect.poll(() => stream.ended()).toBe(true);

    const progress = stream.events.filter((e) => e.event === "progress");
    const last = progress.at(-1)?.data as {
      status: string;
      step: string;
      progress: Array<{ step: string; at: string | null }>;
    };
    expect(last).toMatchObject({ status: "running", step: "ready" });
    // Every step carries its time, in order.
    const times = last.progress.map((s) => Date.parse(s.at ?? ""));
    expect(times.every((t, i) => i === 0 || t >= (times[i - 1] as number))).toBe(true);
    expect(stream.events.at(-1)?.data).toEqual({ status: "running" });
    await expect.poll(() => openProgressStreams()).toBe(0);
  });

  it("gives an estimate from recent runs, per path, and none without history", async () => {
    const { user, agentId, instance } = await provisioned();
    // This installation's history is this test's own (other tests of the file finish runs).
    await db()`delete from instance_runs`;
    const before = await asUser(user, detailRoute, `/api/agents/${agentId}`, {
      params: { id: agentId },
    });
    expect(before.json.agent.estimate).toBeNull();

    // Three finished cold provisions of other instances: 10 s, 20 s, 60 s; one pooled: 2 s.
    const history = [
      ["cold", 10],
      ["cold", 20],
      ["cold", 60],
      ["pool", 2],
    ] as const;
    for (const [path, seconds] of history) {
      await db()`insert into instance_runs (instance_id, action, path, started_at, finished_at, outcome)
        values ('ins_elsewhere', 'provision', ${path}, now() - ${seconds} * interval '1 second', now(), 'ready')`;
    }
    await db()`insert into instance_runs (instance_id, action, path, started_at, finished_at, outcome)
      values ('ins_elsewhere', 'provision', 'cold', now() - interval '900 seconds', now(), 'failed')`;
    const after = await asUser(user, detailRoute, `/api/agents/${agentId}`, {
      params: { id: agentId },
    });
    // No ready pooled gateway: the cold path's median; a failed run does not count.
    expect(after.json.agent.estimate).toEqual({ seconds: 20, basedOn: 3, path: "cold" });

    const run = await startRun(instance.id, "provision");
    await run.path("pool");
    const pooled = await asUser(user, detailRoute, `/api/agents/${agentId}`, {
      params: { id: agentId },
    });
    expect(pooled.json.agent).toMatchObject({
      progressAction: "provision",
      estimate: { seconds: 2, basedOn: 1, path: "pool" },
    });
  });

  it("is the owner's only: another user's agent is 404, no credential 401", async () => {
    const { agentId } = await provisioned();
    const other = await agentUser("solo");
    const res = await asUser(other, eventsRoute, `/api/agents/${agentId}/events`, {
      params: { id: agentId },
    });
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: expect.any(String) });
    const anonymous = await asUser({}, eventsRoute, `/api/agents/${agentId}/events`, {
      params: { id: agentId },
    });
    expect(anonymous.status).toBe(401);
  });

  it("limits the open streams per user, and frees a slot when a client goes away", async () => {
    const { user, agentId } = await provisioned();
    const streams: Awaited<ReturnType<typeof openStream>>[] = [];
    for (let i = 0; i < 5; i++) streams.push(await openStream(user, agentId));
    expect(streams.every((s) => s.response.status === 200)).toBe(true);
    const refused = await asUser(user, eventsRoute, `/api/agents/${agentId}/events`, {
      params: { id: agentId },
    });
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual({ error: "Too many open event streams: at most 5" });
    // Another user has slots of their own.
    const other = await provisioned();
    const theirs = await openStream(other.user, other.agentId);
    expect(theirs.response.status).toBe(200);
    theirs.close();

    streams[0]?.close();
    await expect.poll(() => streams[0]?.ended()).toBe(true);
    const again = await openStream(user, agentId);
    expect(again.response.status).toBe(200);
    for (const s of [...streams, again]) s.close();
    await expect.poll(() => openProgressStreams()).toBe(0);
  });

  it("ends when its client goes away, even after the Request was garbage-collected", async () => {
    // undici unlinks a Request's signal from the one it follows once the Request is collected:
    // the stream holds its Request, or the abort never arrives and the slot stays taken.
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    const { user, agentId } = await provisioned();
    const stream = await openStream(user, agentId);
    expect(stream.response.status).toBe(200);
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
    stream.close();
    await expect.poll(() => stream.ended()).toBe(true);
    await expect.poll(() => openProgressStreams()).toBe(0);
  });

  it("takes its cap from PROGRESS_STREAMS_PER_USER", async () => {
    process.env.PROGRESS_STREAMS_PER_USER = "2";
    resetEnvCache();
    try {
      const { user, agentId } = await provisioned();
      const streams = [await openStream(user, agentId), await openStream(user, agentId)];
      expect(streams.map((s) => s.response.status)).toEqual([200, 200]);
      const refused = await asUser(user, eventsRoute, `/api/agents/${agentId}/events`, {
        params: { id: agentId },
      });
      expect(refused.status).toBe(429);
      expect(refused.json).toEqual({ error: "Too many open event streams: at most 2" });
      for (const s of streams) s.close();
      await expect.poll(() => openProgressStreams()).toBe(0);
    } finally {
      delete process.env.PROGRESS_STREAMS_PER_USER;
      resetEnvCache();
    }
  });
});
