import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as detailRoute from "../../app/routes/api.agents.$id.ts";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import {
  getInstanceByUser,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import {
  beginRun,
  instanceProgress,
  PROGRESS_STEPS,
  RUNS_KEPT,
  recordStep,
  waitWhileStarting,
} from "../../app/server/agents/progress.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { agentUser, asUser } from "./support.ts";

// Provisioning progress (decision 0137): the steps the worker records, one run at a time, as
// GET /api/agents/:id shows them; and a chat sent while the agent starts waits for it.

beforeAll(() => {
  process.env.AGENT_PROVISION_WAIT_MS = "0"; // no worker here
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

const detail = async (user: { cookie: string }, id: string) =>
  (await asUser(user, detailRoute, `/api/agents/${id}`, { params: { id } })).json.agent as {
    status: string;
    step: string | null;
    progress: Array<{ step: string; label: string; at: string | null }>;
  };

describe("progress steps", () => {
  it("are recorded in order with their times and shown by GET /api/agents/:id", async () => {
    const { user, agentId, instance } = await provisioned();
    const before = await detail(user, agentId);
    expect(before).toMatchObject({ status: "provisioning", step: null });
    expect(before.progress.map((s) => [s.step, s.at])).toEqual(
      PROGRESS_STEPS.map((s) => [s, null]),
    );

    await recordStep(instance.id, "container-created");
    await recordStep(instance.id, "gateway-healthy");
    const midway = await detail(user, agentId);
    expect(midway.step).toBe("gateway-healthy");
    expect(midway.progress.map((s) => s.at !== null)).toEqual([true, true, false, false, false]);
    expect(midway.progress[0]?.label).toBe("Container created");
    const [created, healthy] = midway.progress.map((s) => Date.parse(s.at ?? ""));
    expect(healthy).toBeGreaterThanOrEqual(created as number);

    await recordStep(instance.id, "paired");
    await recordStep(instance.id, "ready");
    await updateInstance(instance.id, { observed_state: "running", health: "healthy" });
    const ready = await detail(user, agentId);
    expect(ready).toMatchObject({ status: "running", step: "ready" });
    // Warm-up was skipped in this run: its step stays empty.
    expect(ready.progress.map((s) => s.at !== null)).toEqual([true, true, true, false, true]);
  });

  it("starts a new run when an earlier step comes again, and hides a finished run while starting", async () => {
    const { user, agentId, instance } = await provisioned();
    for (const step of ["container-created", "gateway-healthy", "paired", "ready"] as const) {
      await recordStep(instance.id, step);
    }
    await updateInstance(instance.id, { observed_state: "starting" });
    // Starting again, nothing recorded yet: the old run's "ready" is not this run's.
    expect((await detail(user, agentId)).step).toBeNull();

    await recordStep(instance.id, "container-created");
    const rows = await db()<{ step: string }[]>`
      select step from instance_progress where instance_id = ${instance.id}`;
    expect(rows.map((r) => r.step)).toEqual(["container-created"]);
    expect((await instanceProgress(instance)).step).toBe("container-created");
  });

  it("keeps the latest RUNS_KEPT runs of an instance", async () => {
    const { instance } = await provisioned();
    for (let i = 0; i < RUNS_KEPT + 5; i++) await beginRun(instance.id, "restart");
    const runs = await db()<{ id: number }[]>`
      select id from instance_runs where instance_id = ${instance.id} order by id`;
    expect(runs.length).toBe(RUNS_KEPT);
    const [newest] = await db()<{ id: number }[]>`select max(id)::int as id from instance_runs`;
    expect(Number(runs.at(-1)?.id)).toBe(newest?.id);
  });

  it("is another user's business: their agent is 404", async () => {
    const { agentId } = await provisioned();
    const other = await agentUser("solo");
    const res = await asUser(other, detailRoute, `/api/agents/${agentId}`, {
      params: { id: agentId },
    });
    expect(res.status).toBe(404);
  });
});

describe("a chat sent while the agent starts", () => {
  it("waits until the agent leaves the starting states", async () => {
    const { user, instance } = await provisioned();
    let settled = false;
    const waiting = waitWhileStarting(user.id).then(() => {
      settled = true;
    });
    await updateInstance(instance.id, { observed_state: "running", health: "healthy" });
    const t0 = Date.now();
    await waiting;
    expect(settled).toBe(true);
    // Answered within a poll or two of the change, far from the two-minute limit.
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it("answers at once when the agent is stopped; gives up after AGENT_CHAT_START_WAIT_MS", async () => {
    const { user, instance } = await provisioned();
    await updateInstance(instance.id, { observed_state: "stopped", desired_state: "stopped" });
    await waitWhileStarting(user.id); // returns: not starting

    await updateInstance(instance.id, { observed_state: "starting", desired_state: "running" });
    process.env.AGENT_CHAT_START_WAIT_MS = "300";
    resetEnvCache();
    try {
      const t0 = Date.now();
      await waitWhileStarting(user.id);
      // It waited the whole AGENT_CHAT_START_WAIT_MS, then gave up with the agent still starting.
      expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect((await getInstanceByUser(user.id))?.observed_state).toBe("starting");
    } finally {
      delete process.env.AGENT_CHAT_START_WAIT_MS;
      resetEnvCache();
    }
  });
});
