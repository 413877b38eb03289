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
import { hasLiveJob, type JobPayload, sendJob } from "../../app/server/platform/jobs.server.ts";
import { withFillSlot } from "../../worker/instances/fill-slot.ts";
import { withInstanceLock } from "../../worker/instances/lock.ts";
import { setHostMemorySource } from "../../worker/instances/memory-pressure.ts";
import { observe } from "../../worker/instances/observe.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { sampleAll } from "../../worker/instances/sampler.ts";
import { withWakeSlot } from "../../worker/instances/wake-slots.ts";
import { instanceAction } from "../../worker/jobs/instance-action.ts";
import { provisionInstance } from "../../worker/jobs/provision-instance.ts";
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

// Decision 0241 (issue 52, the soak): every gateway boot takes one of its node's boot slots, not
// only wakes and reconcile's restarts (0221, 0240): a provision's cold start, a user's start,
// restart or repair. A boot a user waits for goes before reconcile's restarts, and waits for its
// slot without the instance's lock (a user's stop never waits for a boot). No gateway boots here:
// the stand-in engine of restart-queue.test.ts.

const stand = standInEngine();

/** The node's slots (WAKE_CONCURRENCY) for the test. */
function slots(n: number) {
  process.env.WAKE_CONCURRENCY = String(n);
  resetEnvCache();
}

/** A lifecycle action as the web asks for it (its job is live) and the worker runs it. */
async function action(row: InstanceRow, act: JobPayload<"instance-action">["action"]) {
  const payload = { instanceId: row.id, action: act };
  await sendJob("instance-action", payload);
  return instanceAction(payload);
}

/** Whether the instance's user boot waits in its line (no slot yet). */
async function bootWaits(row: InstanceRow): Promise<boolean> {
  const [boot] = await db()`
    select 1 from instance_boots where instance_id = ${row.id} and started_at is null`;
  return boot !== undefined;
}

/** A user's stop of a running instance, before the test's engine restart. */
async function stoppedByUser(): Promise<InstanceRow> {
  const row = await runningInstance(stand.engine);
  expect(await action(row, "stop")).toMatchObject({ ok: true, status: "stopped" });
  return (await getInstance(row.id)) as InstanceRow;
}

it("a provision's boot waits while both of the node's slots are held, and starts once one is free", async () => {
  slots(2);
  const { engine } = stand;
  const a = await runningInstance(engine);
  const b = await runningInstance(engine);
  await engineRestart(engine);
  await reconcileAll();
  // A provision's retry: its container was created by an attempt that died before the start.
  const p = await runningInstance(engine);
  const container = engine.find(p.container_name) as StandInContainer;
  container.running = false;
  container.healthy = false;
  await updateInstance(p.id, { observed_state: "provisioning", paired_at: null });

  const restarts = [restartJob(a), restartJob(b)];
  await waitFor(async () => engine.started.length === 2, { what: "two restarts booting" });
  await sendJob("provision-instance", { instanceId: p.id });
  const provisioned = provisionInstance({ instanceId: p.id });
  await waitFor(() => bootWaits(p), { what: "the provision's boot in line" });
  expect(engine.started).toEqual([a.container_name, b.container_name]);

  // A's boot is over: its slot goes to the provision.
  engine.healthy(a.container_name);
  await waitFor(async () => engine.started.includes(p.container_name), { what: "its boot" });
  expect(engine.peak).toBe(2);
  engine.healthy(b.container_name);
  engine.healthy(p.container_name);
  // Healthy; the stand-in speaks no gateway protocol, so the pairing after the boot fails.
  await expect(provisioned).rejects.toThrow();
  expect(await Promise.all(restarts)).toMatchObject([{ restarted: true }, { restarted: true }]);
  expect(await bootWaits(p)).toBe(false);
});

it("a user's start waits for a slot without the instance's lock: a stop meanwhile answers at once, and the start then boots nothing", async () => {
  slots(1);
  const { engine } = stand;
  const a = await runningInstance(engine);
  const c = await stoppedByUser();
  await engineRestart(engine);
  await reconcileAll();
  const restart = restartJob(a);
  await waitFor(async () => engine.started.length === 1, { what: "the restart's boot" });

  const start = action(c, "start");
  await waitFor(() => bootWaits(c), { what: "the start in line" });
  expect((await getInstance(c.id))?.observed_state).toBe("stopped");
  // The user stops it again while its start waits: the stop does not wait for the boot.
  expect(await action(c, "stop")).toMatchObject({ ok: true, status: "stopped" });

  engine.healthy(a.container_name);
  expect(await restart).toMatchObject({ restarted: true });
  // Its slot came, but the instance is no longer meant to run: nothing starts, a 502.
  expect(await start).toMatchObject({ ok: false, failure: "unavailable" });
  expect(engine.started).toEqual([a.container_name]);
  expect((await getInstance(c.id))?.desired_state).toBe("stopped");
});

it("a user's start goes before reconcile's restarts queued earlier, and answers running", async () => {
  slots(1);
  const { engine } = stand;
  const a = await runningInstance(engine);
  const b = await runningInstance(engine);
  const c = await stoppedByUser();
  await engineRestart(engine);
  await reconcileAll();
  const restarts = [restartJob(a), restartJob(b)];
  await waitFor(async () => engine.started.length === 1, { what: "the first restart's boot" });
  expect(engine.started).toEqual([a.container_name]);

  const start = action(c, "start");
  await waitFor(() => bootWaits(c), { what: "the start in line" });
  // The sampler's observation shows it on its way up, not stopped.
  expect((await observe((await getInstance(c.id)) as InstanceRow)).observed_state).toBe("starting");
  engine.healthy(a.container_name);
  await waitFor(async () => engine.started.length === 2, { what: "the next boot" });
  expect(engine.started).toEqual([a.container_name, c.container_name]);
  engine.healthy(c.container_name);
  expect(await start).toMatchObject({ ok: true, status: "running" });
  expect((await getInstance(c.id))?.observed_state).toBe("running");

  await waitFor(async () => engine.started.length === 3, { what: "B's restart" });
  engine.healthy(b.container_name);
  expect(await Promise.all(restarts)).toMatchObject([{ restarted: true }, { restarted: true }]);
  expect(engine.peak).toBe(1);
});

it("a restart lets a wake at the head of its line go first, even with the slot free", async () => {
  slots(1);
  const { engine } = stand;
  const a = await runningInstance(engine);
  await engineRestart(engine);
  await reconcileAll();

  const sleeperUser = `usr_boot_slots_sleeper_${Date.now()}`;
  await ensureUser(sleeperUser);
  const sleeper = await updateInstance((await ensureInstanceRecord(sleeperUser)).id, {
    observed_state: "sleeping",
  });
  expect(await requestWake(sleeper.id, "chat")).toBe(true);
  // The wake waits for memory at the head of its line (its admission, 0222); each look counted.
  let looks = 0;
  let room = false;
  process.env.MEMORY_TIGHT_PERCENT = "1";
  resetEnvCache();
  setHostMemorySource({
    read: async () => {
      looks += 1;
      return host(room ? 20 * 1024 ** 3 : 0);
    },
  });
  let woke = false;
  const wake = withWakeSlot(sleeper.id, async () => {
    woke = true;
    await updateInstance(sleeper.id, { observed_state: "running" });
  });
  await waitFor(async () => looks >= 1, { what: "the wake waiting for room" });

  const restart = restartJob(a);
  await waitFor(
    async () => {
      const [row] = await db()<{ node: string | null }[]>`
        select node from instance_restarts where instance_id = ${a.id}`;
      return row?.node === "host";
    },
    { what: "the restart looking at its line" },
  );
  // Several of the wake's looks (100 ms apart) later, the restart (250 ms) has looked too.
  const seen = looks;
  await waitFor(async () => looks >= seen + 6, { what: "the wake's further looks" });
  expect(engine.started).toEqual([]);

  room = true;
  await wake;
  expect(woke).toBe(true);
  await waitFor(async () => engine.started.length === 1, { what: "the restart's boot" });
  engine.healthy(a.container_name);
  expect(await restart).toMatchObject({ restarted: true });
});

it("a pool fill's boot lets a reconcile restart waiting on its node go first", async () => {
  const { engine } = stand;
  const a = await runningInstance(engine);
  await engineRestart(engine);
  await reconcileAll();
  // The fill comes first, with the slot free: a restart queued on the node still goes before it.
  let filled = false;
  const fill = withFillSlot("host", async () => {
    filled = true;
  });
  const restart = restartJob(a);
  await waitFor(async () => engine.started.length === 1, { what: "the restart's boot" });
  expect(filled).toBe(false);
  engine.healthy(a.container_name);
  expect(await restart).toMatchObject({ restarted: true });
  await fill;
  expect(filled).toBe(true);
});

it("a gateway that exits is seen by the sampler's pass and restarted through the line, its policy brought to no", async () => {
  const { engine } = stand;
  const a = await runningInstance(engine);
  // Made before decision 0241: the engine would restart it itself.
  expect(engine.find(a.container_name)?.restartPolicy).toBe("on-failure");
  engine.crash(a.container_name, 1);

  // The sampler's pass (every 10 s), not reconcile's minute: the exit is recorded and backed
  // off, and the restart queued in the line; the engine restarts nothing itself any more.
  await sampleAll();
  const down = (await getInstance(a.id)) as InstanceRow;
  expect(down).toMatchObject({
    observed_state: "starting",
    crash_restarts: 1,
    last_error: "gateway exited with code 1",
  });
  expect(await hasLiveJob("restart-instance", { instanceId: a.id })).toBe(true);
  expect(engine.find(a.container_name)?.restartPolicy).toBe("no");
  expect(engine.started).toEqual([]);

  const restart = restartJob(a);
  await waitFor(async () => engine.started.length === 1, { what: "the restart's boot" });
  engine.healthy(a.container_name);
  expect(await restart).toMatchObject({ restarted: true });
  expect(await state(a)).toBe("running");
});

it("a restart whose instance's lock is held gives its slot back and steps aside: the next boots meanwhile", async () => {
  const { engine } = stand;
  const a = await runningInstance(engine);
  const b = await runningInstance(engine);
  await engineRestart(engine);
  await reconcileAll();
  // Another operation holds A's lock (a provision waiting for a slot, a backup's copy).
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked = false;
  const holder = withInstanceLock(a.id, async () => {
    locked = true;
    await held;
  });
  await waitFor(async () => locked, { what: "A's lock held" });

  // A is first in line, but a slot holder never waits for a lock: B boots meanwhile.
  const restarts = [restartJob(a), restartJob(b)];
  await waitFor(async () => engine.started.length === 1, { what: "a boot" });
  expect(engine.started).toEqual([b.container_name]);
  release();
  await holder;
  engine.healthy(b.container_name);
  await waitFor(async () => engine.started.length === 2, { what: "A's boot" });
  engine.healthy(a.container_name);
  expect(await Promise.all(restarts)).toMatchObject([{ restarted: true }, { restarted: true }]);
  expect(engine.peak).toBe(1);
});
