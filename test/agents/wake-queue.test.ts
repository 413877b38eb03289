import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import * as detailRoute from "../../app/routes/api.agents.$id.ts";
import {
  ensureInstanceRecord,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { agentLive } from "../../app/server/agents/pages.server.ts";
import { clearSleep, markWakeRequested } from "../../app/server/agents/sleep.server.ts";
import { requestWake } from "../../app/server/agents/wake.server.ts";
import { wakeQueuePlace } from "../../app/server/agents/wake-queue.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { stopBoss } from "../../app/server/platform/jobs.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { wakeConcurrency } from "../../worker/instances/node-slots.ts";
import { withWakeSlot } from "../../worker/instances/wake-slots.ts";
import { type AgentRuntime, setRuntime } from "../../worker/runtime/index.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { agentUser, asUser } from "./support.ts";

// The cap on concurrent wakes and its queue (decision 0221), without a gateway: each "wake" is
// a stand-in that marks the instance starting, as ensureContainer does, and finishes when the
// test says so; what is checked is how many run at once, in which order, and what the user sees.

beforeAll(() => {
  process.env.WAKE_CONCURRENCY = "2";
  // The host's memory is another test's matter (memory-pressure.test.ts): every wake fits here.
  process.env.MEMORY_TIGHT_PERCENT = "0";
  resetEnvCache();
});
afterAll(async () => {
  delete process.env.WAKE_CONCURRENCY;
  delete process.env.MEMORY_TIGHT_PERCENT;
  resetEnvCache();
  await stopBoss({ graceful: false });
});
afterEach(() => resetRateLimiters());

interface Sleeper {
  user: { id: string; cookie: string };
  row: InstanceRow;
  agentId: string;
}

/**
 * A sleeping instance whose wake was asked for `secondsAgo` ago; its wake-instance job waits in
 * the queue (no worker runs here), unless `job` is false (a job that gave up).
 */
async function sleeper(secondsAgo: number, job = true): Promise<Sleeper> {
  const user = await agentUser("solo");
  const row = await ensureInstanceRecord(user.id);
  const agentId = `agt_wq${row.id.replace(/[^a-z0-9]/gi, "").slice(-16)}`;
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${agentId}, ${user.id}, 'Helper', 'main', 'openai/gpt-4o-mini', 'starter')`;
  await updateInstance(row.id, { observed_state: "sleeping" });
  expect(await (job ? requestWake(row.id, "chat") : markWakeRequested(row.id, "chat"))).toBe(true);
  await db()`update instance_sleep
    set wake_requested_at = now() - make_interval(secs => ${secondsAgo})
    where instance_id = ${row.id}`;
  return { user, row, agentId };
}

/** A stand-in wake: starting at once, awake when `finish` is called. */
function standInWake(s: Sleeper, running: Set<string>, peak: { n: number }) {
  let finish!: () => void;
  const done = new Promise<void>((r) => {
    finish = r;
  });
  const wake = async () => {
    running.add(s.row.id);
    peak.n = Math.max(peak.n, running.size);
    await updateInstance(s.row.id, { observed_state: "starting" });
    await clearSleep(s.row.id);
    await done;
    await updateInstance(s.row.id, { observed_state: "running" });
    running.delete(s.row.id);
    return s.row.id;
  };
  return { wake, finish };
}

const detail = (s: Sleeper) =>
  asUser(s.user, detailRoute, `/api/agents/${s.agentId}`, { params: { id: s.agentId } });

it("runs at most WAKE_CONCURRENCY wakes at once, the others in order of request, and the agent's detail says how many are ahead", async () => {
  // Asked for 40, 30, 20 and 10 s ago: that is their order, whatever order the jobs run in.
  const sleepers = await Promise.all([40, 30, 20, 10].map((ago) => sleeper(ago)));
  const [first, second, third, fourth] = sleepers as [Sleeper, Sleeper, Sleeper, Sleeper];
  const running = new Set<string>();
  const peak = { n: 0 };
  const stands = sleepers.map((s) => standInWake(s, running, peak));
  // Before any worker looks, the user sees the line as asked for.
  expect((await detail(fourth)).json.agent.wakeQueue).toMatchObject({ ahead: 3 });

  // The jobs start in the reverse order of the requests.
  const results = [...sleepers.keys()]
    .reverse()
    .map((i) =>
      withWakeSlot(
        (sleepers[i] as Sleeper).row.id,
        (stands[i] as { wake: () => Promise<string> }).wake,
      ),
    );

  await waitFor(async () => running.size === 2, { what: "two wakes running", timeoutMs: 20_000 });
  expect([...running].sort()).toEqual([first.row.id, second.row.id].sort());
  const third_ = await detail(third);
  expect(third_.status).toBe(200);
  expect(third_.json.agent.status).toBe("sleeping");
  expect(third_.json.agent.wakeQueue).toMatchObject({ ahead: 0 });
  expect((await detail(fourth)).json.agent.wakeQueue).toMatchObject({ ahead: 1 });
  // The agent page's live refresh carries it too ("Waking, 1 ahead of you.").
  expect((await agentLive(fourth.user.id, fourth.agentId)).wakeQueue).toMatchObject({ ahead: 1 });
  // A waking (starting) agent is out of the line.
  expect((await detail(first)).json.agent.wakeQueue).toBeNull();

  stands[0]?.finish();
  await waitFor(async () => running.has(third.row.id), {
    what: "the third wake",
    timeoutMs: 20_000,
  });
  expect(running.has(fourth.row.id)).toBe(false);
  expect((await detail(fourth)).json.agent.wakeQueue).toMatchObject({ ahead: 0 });

  for (const s of stands) s.finish();
  expect(await Promise.all(results)).toHaveLength(4);
  expect(peak.n).toBe(2);
  expect(await wakeQueuePlace(fourth.row.id)).toBeNull();
});

it("a wake whose job gave up does not hold the line, and an agent already awake needs no slot", async () => {
  // Asked for first, but its job is gone (failed for good).
  const dead = await sleeper(120, false);
  const live = await sleeper(5);
  const running = new Set<string>();
  const stand = standInWake(live, running, { n: 0 });
  stand.finish();
  expect(await withWakeSlot(live.row.id, stand.wake)).toBe(live.row.id);
  // Awake already: the wake runs at once (and, in the worker, finds nothing to do).
  expect(await withWakeSlot(live.row.id, async () => "nothing to wake")).toBe("nothing to wake");
  // Its own user sees nobody ahead (the live one asked later and has woken).
  expect(await wakeQueuePlace(dead.row.id)).toMatchObject({ ahead: 0 });
});

it("a wake that failed goes back to its place in the line for its retry", async () => {
  const s = await sleeper(3);
  await expect(
    withWakeSlot(s.row.id, async () => {
      throw new Error("engine refused");
    }),
  ).rejects.toThrow("engine refused");
  expect(await wakeQueuePlace(s.row.id)).toMatchObject({ ahead: 0 });
});

it("never takes more slots than the lock pool leaves room for", () => {
  process.env.WAKE_CONCURRENCY = "16";
  resetEnvCache();
  try {
    // The default lock pool of 20: two connections per running wake, two left for the rest.
    expect(wakeConcurrency()).toBe(9);
  } finally {
    process.env.WAKE_CONCURRENCY = "2";
    resetEnvCache();
  }
});

it("on a Swarm the slots are per node: a wake on a node with a free slot does not wait behind another node's line", async () => {
  process.env.WAKE_CONCURRENCY = "1";
  resetEnvCache();
  // Asked for in this order: two on node A, then one on node B.
  const [a1, a2, b1] = (await Promise.all([30, 20, 10].map((ago) => sleeper(ago)))) as [
    Sleeper,
    Sleeper,
    Sleeper,
  ];
  const nodeOf = new Map([
    [a1.row.container_name, "node-a"],
    [a2.row.container_name, "node-a"],
    [b1.row.container_name, "node-b"],
  ]);
  // A cluster driver that knows only which node each gateway is pinned to.
  setRuntime(
    new Proxy(
      {},
      {
        has: (_t, name) => name === "setDraining" || name === "copyVolume" || name === "nodeOf",
        get: (_t, name) => {
          if (name === "then") return undefined;
          if (name === "nodeOf") return async (id: string) => nodeOf.get(id);
          return async () => {
            throw new Error(`the wake queue called the driver's ${String(name)}`);
          };
        },
      },
    ) as AgentRuntime,
  );
  try {
    const running = new Set<string>();
    const peak = { n: 0 };
    const stands = [a1, a2, b1].map((s) => standInWake(s, running, peak));
    const results = [a1, a2, b1].map((s, i) =>
      withWakeSlot(s.row.id, (stands[i] as { wake: () => Promise<string> }).wake),
    );
    // A's one slot runs a1; b1, asked for last, runs on B at once; a2 waits behind a1.
    await waitFor(async () => running.has(a1.row.id) && running.has(b1.row.id), {
      what: "a wake on each node",
      timeoutMs: 20_000,
    });
    expect(running.has(a2.row.id)).toBe(false);
    expect(await wakeQueuePlace(a2.row.id)).toMatchObject({ ahead: 0 });
    stands[0]?.finish();
    await waitFor(async () => running.has(a2.row.id), { what: "a2 after a1", timeoutMs: 20_000 });
    for (const s of stands) s.finish();
    expect(await Promise.all(results)).toHaveLength(3);
  } finally {
    setRuntime(undefined);
    process.env.WAKE_CONCURRENCY = "2";
    resetEnvCache();
  }
});
