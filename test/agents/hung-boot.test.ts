import { afterAll, beforeAll, expect, it } from "vitest";
import { getInstance, updateInstance } from "../../app/server/agents/instances.server.ts";
import { startTurn } from "../../app/server/ai/turns.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { hasLiveJob, sendJob } from "../../app/server/platform/jobs.server.ts";
import { observe } from "../../worker/instances/observe.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { waitFor } from "../helpers/wait-for.ts";
import {
  restartJob,
  runningInstance,
  type StandInContainer,
  standInEngine,
  state,
} from "./stand-in-engine.ts";

// Issue 52 (decision 0253): a gateway whose container runs but that never answered /healthz
// since it started stayed `starting` for ever; nothing restarted it. Reconcile now restarts such a
// hung boot once it has run for twice the boot bound. A gateway that answered since its start
// (slow now, not hung), one with a chat turn running and one still within the bound are left
// alone. The stand-in engine's containers answer /healthz when the test says so; they started an
// hour ago, and the bound here is 1 s.

const stand = standInEngine();

beforeAll(() => {
  process.env.GATEWAY_HEALTH_TIMEOUT_MS = "1000";
  resetEnvCache();
});
afterAll(() => {
  delete process.env.GATEWAY_HEALTH_TIMEOUT_MS;
  resetEnvCache();
});

const container = (name: string) => stand.engine.find(name) as StandInContainer;

it("a gateway running but never healthy since its start is stopped and queued for a restart, counted in the crash backoff; the restart boots it", async () => {
  const { engine } = stand;
  const row = await runningInstance(engine);
  container(row.container_name).healthy = false;

  const pass = await reconcileAll();
  expect(pass.instances[row.id]).toBe("boot hung, restart queued");
  expect(container(row.container_name).running).toBe(false);
  const recorded = await getInstance(row.id);
  expect(recorded).toMatchObject({ observed_state: "starting", crash_restarts: 1 });
  expect(recorded?.last_error).toMatch(
    /^the gateway has not answered \/healthz in the \d+ s since it started: restarted$/,
  );
  expect(recorded?.next_restart_at?.getTime()).toBeGreaterThan(Date.now());
  expect(await hasLiveJob("restart-instance", { instanceId: row.id })).toBe(true);

  // The queued restart boots it; healthy, it runs and its backoff is reset by the next pass.
  const restart = restartJob(row);
  await waitFor(async () => engine.started.includes(row.container_name), { what: "the boot" });
  engine.healthy(row.container_name);
  expect(await restart).toMatchObject({ restarted: true });
  expect(await state(row)).toBe("running");
  expect((await getInstance(row.id))?.healthy_at).toBeInstanceOf(Date);
  expect((await reconcileAll()).instances[row.id]).toBe("ok");
  expect(await getInstance(row.id)).toMatchObject({ crash_restarts: 0, next_restart_at: null });
});

it("a hung boot again within its backoff is left running until the backoff is over", async () => {
  const { engine } = stand;
  const row = await runningInstance(engine);
  const due = new Date(Date.now() + 60_000);
  await updateInstance(row.id, { crash_restarts: 1, next_restart_at: due });
  container(row.container_name).healthy = false;

  const pass = await reconcileAll();
  expect(pass.instances[row.id]).toBe(`boot hung, restart due ${due.toISOString()}`);
  expect(container(row.container_name).running).toBe(true);
  expect(await hasLiveJob("restart-instance", { instanceId: row.id })).toBe(false);

  await updateInstance(row.id, { next_restart_at: new Date(Date.now() - 1_000) });
  expect((await reconcileAll()).instances[row.id]).toBe("boot hung, restart queued");
  expect(await getInstance(row.id)).toMatchObject({ crash_restarts: 2 });
});

it("a gateway that answered since its start, one with a chat turn running and one within its bound are not restarted", async () => {
  const { engine } = stand;
  // Answered once since its start (an observation saw it healthy), slow to answer now.
  const slow = await runningInstance(engine);
  expect((await observe(slow)).health).toBe("healthy");
  container(slow.container_name).healthy = false;
  // Never answered, but a chat turn runs on it.
  const busy = await runningInstance(engine);
  container(busy.container_name).healthy = false;
  const endTurn = await startTurn({ instanceId: busy.id, agentId: null, personId: null });
  // Never answered, started just now: still within twice its bound.
  const young = await runningInstance(engine);
  Object.assign(container(young.container_name), {
    healthy: false,
    startedAt: new Date().toISOString(),
  });

  const pass = await reconcileAll();
  for (const row of [slow, busy, young]) {
    expect(pass.instances[row.id]).toBe("ok");
    expect(container(row.container_name).running).toBe(true);
    expect(await getInstance(row.id)).toMatchObject({
      observed_state: "starting",
      health: "unhealthy",
      crash_restarts: 0,
    });
  }

  // Its turn over, the busy one that never answered is a hung boot.
  await endTurn();
  expect((await reconcileAll()).instances[busy.id]).toBe("boot hung, restart queued");
});

it("a hung boot whose restart is queued already is left to that restart", async () => {
  const { engine } = stand;
  const row = await runningInstance(engine);
  container(row.container_name).healthy = false;
  await sendJob("restart-instance", { instanceId: row.id });

  expect((await reconcileAll()).instances[row.id]).toBe("restart under way");
  expect(container(row.container_name).running).toBe(true);
  expect(await getInstance(row.id)).toMatchObject({ crash_restarts: 0 });
});
