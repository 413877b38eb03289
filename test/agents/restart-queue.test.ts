import { expect, it } from "vitest";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { requestWake } from "../../app/server/agents/wake.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss, hasLiveJob } from "../../app/server/platform/jobs.server.ts";
import { runAction } from "../../worker/instances/actions.ts";
import { setHostMemorySource } from "../../worker/instances/memory-pressure.ts";
import { observe } from "../../worker/instances/observe.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { withWakeSlot } from "../../worker/instances/wake-slots.ts";
import { ensureUser } from "../helpers/users.ts";
import { waitFor } from "../helpers/wait-for.ts";
import {
  engineRestart,
  restartJob,
  runningInstance,
  type StandInContainer,
  standInEngine,
  state,
} from "./stand-in-engine.ts";
import { hostWithAvailable as host } from "./support.ts";

// Issue 52 (the soak, decision 0238): after the engine came back, reconcile restarted every
// stopped gateway at once, twenty boots thrashed on two cores for many minutes and their health
// waits ran out. Now reconcile's restarts take the wakes' per-node slots (decision 0240). No
// gateway boots here: a stand-in driver whose containers "boot" when started and answer
// /healthz (a loopback server each) when the test says so; what is checked is how many boot at
// once, in which order, and what a restart no longer wanted, or one that died, leaves behind.

const stand = standInEngine();

it("after the engine's restart, reconcile queues the restarts and they boot one at a time, first queued first; a restart stopped by its user meanwhile does nothing", async () => {
  const { engine } = stand;
  const rows = [];
  for (let i = 0; i < 4; i++) rows.push(await runningInstance(engine));
  const [a, b, c, d] = rows as [InstanceRow, InstanceRow, InstanceRow, InstanceRow];
  await engineRestart(engine);

  // The pass boots nothing itself: it records each instance `starting` and queues its restart.
  const pass = await reconcileAll();
  for (const row of rows) {
    expect(pass.instances[row.id]).toBe("stopped with the engine, restart queued");
    expect(await state(row)).toBe("starting");
    expect(await hasLiveJob("restart-instance", { instanceId: row.id })).toBe(true);
  }
  expect(engine.started).toEqual([]);
  // The sampler's observation of a container still down keeps it `starting` (not `stopped`).
  expect((await observe(a)).observed_state).toBe("starting");
  // A second pass queues nothing more: one restart per instance.
  const again = await reconcileAll();
  expect(rows.map((row) => again.instances[row.id])).toEqual(rows.map(() => "restart under way"));
  const jobs = await (await getBoss()).findJobs("restart-instance");
  expect(jobs).toHaveLength(4);

  // B's user stops it before its turn.
  await runAction((await getInstance(b.id)) as InstanceRow, "stop");

  // The jobs start in the reverse order of the queue: the line's order is what counts.
  const results = [d, c, b, a].map((row) => restartJob(row));
  // B's restart is no longer wanted: it ends at once, without a slot or a start.
  expect(await results[2]).toMatchObject({ restarted: false });
  await waitFor(async () => engine.started.length === 1, { what: "the first boot" });
  expect(engine.started).toEqual([a.container_name]);
  expect(await state(c)).toBe("starting");
  // Only once A is healthy does the next boot begin: C (B is stopped).
  engine.healthy(a.container_name);
  await waitFor(async () => engine.started.length === 2, { what: "the second boot" });
  expect(engine.started).toEqual([a.container_name, c.container_name]);
  expect(await results[3]).toMatchObject({ restarted: true });
  expect(await state(a)).toBe("running");
  engine.healthy(c.container_name);
  await waitFor(async () => engine.started.length === 3, { what: "the third boot" });
  engine.healthy(d.container_name);
  expect(await Promise.all([results[0], results[1]])).toMatchObject([
    { restarted: true },
    { restarted: true },
  ]);

  expect(engine.started).toEqual([a.container_name, c.container_name, d.container_name]);
  expect(engine.peak).toBe(1);
  expect(await Promise.all(rows.map(state))).toEqual(["running", "stopped", "running", "running"]);
  expect((await getInstance(b.id))?.desired_state).toBe("stopped");
  // The warm-up follows each boot, as before; nothing is left in the line.
  for (const row of [a, c, d]) {
    expect(await hasLiveJob("warm-up-instance", { instanceId: row.id })).toBe(true);
  }
  expect(await hasLiveJob("warm-up-instance", { instanceId: b.id })).toBe(false);
  expect(await db()`select * from instance_restarts`).toEqual([]);
  // The crash backoff was not touched: the engine's shutdown is no crash of the gateway's.
  expect((await getInstance(a.id))?.crash_restarts).toBe(0);
});

it("a restart whose job died frees its slot for the next, and reconcile queues it again", async () => {
  const { engine } = stand;
  const e = await runningInstance(engine);
  const f = await runningInstance(engine);
  await engineRestart(engine);
  await reconcileAll();
  (engine.find(e.container_name) as StandInContainer).refuseStart = true;

  // E's job dies mid-boot (the engine refused its start): its slot goes with it, F boots.
  const fDone = restartJob(f);
  await expect(restartJob(e)).rejects.toThrow("the engine refused the start");
  await waitFor(async () => engine.started.includes(f.container_name), { what: "F's boot" });
  engine.healthy(f.container_name);
  expect(await fDone).toMatchObject({ restarted: true });

  // E is still on its way back while its job may be retried…
  expect((await observe((await getInstance(e.id)) as InstanceRow)).observed_state).toBe("starting");
  // …and once its job has given up for good, the next pass queues it again.
  const boss = await getBoss();
  const [dead] = await boss.findJobs("restart-instance", { data: { instanceId: e.id } });
  // Given up (cancelled here: to the line, a job whose retries are used up is the same).
  await boss.cancel("restart-instance", dead?.id as string);
  expect(await hasLiveJob("restart-instance", { instanceId: e.id })).toBe(false);
  (engine.find(e.container_name) as StandInContainer).refuseStart = false;
  const pass = await reconcileAll();
  expect(pass.instances[e.id]).toBe("stopped with the engine, restart queued");
  expect(await hasLiveJob("restart-instance", { instanceId: e.id })).toBe(true);
  const eDone = restartJob(e);
  await waitFor(async () => engine.started.includes(e.container_name), { what: "E's boot" });
  engine.healthy(e.container_name);
  expect(await eDone).toMatchObject({ restarted: true });
  expect(await state(e)).toBe("running");
  expect(engine.peak).toBe(1);
});

it("a wake waits while a restart holds the node's one slot, and runs once the boot is over", async () => {
  const { engine } = stand;
  const booting = await runningInstance(engine);
  await engineRestart(engine);
  await reconcileAll();
  const restart = restartJob(booting);
  await waitFor(async () => engine.started.length === 1, { what: "the restart's boot" });

  // A sleeper's wake is asked for while the restart boots.
  const sleeperUser = `usr_restart_queue_sleeper_${Date.now()}`;
  await ensureUser(sleeperUser);
  const sleeper = await updateInstance((await ensureInstanceRecord(sleeperUser)).id, {
    observed_state: "sleeping",
  });
  expect(await requestWake(sleeper.id, "chat")).toBe(true);
  let woke = false;
  // Each look of the wake at the head of its line reads the host's memory (its admission, 0222)
  // just before it tries for a slot: counted, so the test knows it has tried, and failed.
  let looks = 0;
  process.env.MEMORY_TIGHT_PERCENT = "1";
  resetEnvCache();
  setHostMemorySource({
    read: async () => {
      looks += 1;
      return host(20 * 1024 ** 3);
    },
  });
  const wake = withWakeSlot(sleeper.id, async () => {
    woke = true;
    await updateInstance(sleeper.id, { observed_state: "running" });
  });
  await waitFor(async () => looks >= 3 || woke, { what: "the wake trying for a slot" });
  // Its line has nobody ahead: only the slot held by the boot keeps it waiting.
  expect(woke).toBe(false);
  engine.healthy(booting.container_name);
  await restart;
  await wake;
  expect(woke).toBe(true);
});
