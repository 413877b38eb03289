import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { provisionAgent } from "../../app/server/agents/agent-provisioning.server.ts";
import { agentDetail } from "../../app/server/agents/agent-views.server.ts";
import {
  getInstance,
  getInstanceByUser,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { provisionQueuePlace } from "../../app/server/agents/provision-queue.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { stopBoss } from "../../app/server/platform/jobs.server.ts";
import { NoRoomToStartError, waitForRoomToStart } from "../../worker/instances/admission.ts";
import { setHostMemorySource } from "../../worker/instances/memory-pressure.ts";
import { provision } from "../../worker/instances/provision.ts";
import { type AgentRuntime, NoCapacityError, setRuntime } from "../../worker/runtime/index.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { agentUser, hostWithAvailable as host } from "./support.ts";

// Admission of a provision that starts a new gateway (decision 0231), without a gateway: the
// host's memory comes from a stand-in source (as memory-pressure.test.ts does), a Swarm's nodes
// from a stand-in driver whose placement finds no room. What is checked: a provision that does
// not fit waits in line, in the order asked, with its place in GET /api/agents/:id, starts once
// it fits and is at the head, and fails with a clear error (no container made) after the bound.

const MiB = 1024 ** 2;
const GiB = 1024 * MiB;

beforeAll(() => {
  // The API answers at once (the provision job is not run here: no worker in this file).
  process.env.AGENT_PROVISION_WAIT_MS = "0";
  resetEnvCache();
});
afterEach(() => {
  setHostMemorySource(undefined);
  setRuntime(undefined);
  delete process.env.PROVISION_ROOM_WAIT_MS;
  resetEnvCache();
});
afterAll(async () => {
  delete process.env.AGENT_PROVISION_WAIT_MS;
  resetEnvCache();
  await stopBoss({ graceful: false });
});

/** A user's agent provisioned through the API's service: its instance and its job in line. */
async function provisioned() {
  const user = await agentUser("solo");
  const { agent } = await provisionAgent(user.id, { name: "density" });
  const row = (await getInstanceByUser(user.id)) as InstanceRow;
  return { user, agentId: agent.id, row };
}

it("a provision that does not fit waits in line, in order, with its place shown, and starts when it fits", async () => {
  let figures = host(600 * MiB); // 600 + 300 − 512 = 388 MiB of room: no gateway fits
  let reads = 0;
  setHostMemorySource({
    read: async () => {
      reads += 1;
      return figures;
    },
  });
  const first = await provisioned();
  const second = await provisioned();
  expect(await provisionQueuePlace(first.row.id)).toMatchObject({ ahead: 0 });
  // The second user sees the first ahead of them.
  const detail = await agentDetail(second.user.id, second.agentId);
  expect(detail.agent.status).toBe("provisioning");
  expect(detail.agent.provisionQueue).toMatchObject({ ahead: 1 });

  let firstStarted = false;
  let secondStarted = false;
  const firstWait = waitForRoomToStart(first.row).then(() => {
    firstStarted = true;
  });
  const secondWait = waitForRoomToStart(second.row).then(() => {
    secondStarted = true;
  });
  await waitFor(async () => reads >= 3, {
    what: "the provision looking for room",
    timeoutMs: 10_000,
  });
  expect(firstStarted).toBe(false);

  figures = host(2 * GiB); // an agent went to sleep: 1.8 GiB of room, one gateway fits
  await firstWait;
  expect(firstStarted).toBe(true);
  // The second waits behind the first until its gateway exists (room is then counted anew).
  expect(secondStarted).toBe(false);
  expect(await provisionQueuePlace(second.row.id)).toMatchObject({ ahead: 1 });
  await updateInstance(first.row.id, { container_id: "c-first", observed_state: "starting" });
  expect(await provisionQueuePlace(first.row.id)).toBeNull();
  await secondWait;
  expect(secondStarted).toBe(true);
  await updateInstance(second.row.id, { container_id: "c-second", observed_state: "starting" });
});

it("a provision that finds no room within PROVISION_ROOM_WAIT_MS fails with a clear error", async () => {
  process.env.PROVISION_ROOM_WAIT_MS = "200";
  resetEnvCache();
  setHostMemorySource({ read: async () => host(100 * MiB) });
  const { row } = await provisioned();
  await expect(waitForRoomToStart(row)).rejects.toBeInstanceOf(NoRoomToStartError);
  // It keeps its place for the job's retry.
  expect(await provisionQueuePlace(row.id)).toMatchObject({ ahead: 0 });
});

it("on Swarm, a provision no node has room for creates nothing and says why", async () => {
  process.env.PROVISION_ROOM_WAIT_MS = "200";
  resetEnvCache();
  // A cluster driver whose placement finds no node with room; every other call is recorded.
  const calls: string[] = [];
  const stub = new Proxy(
    {},
    {
      has: (_t, name) => name === "setDraining" || name === "copyVolume" || name === "place",
      get: (_t, name) => {
        if (name === "then") return undefined;
        if (name === "driver") return "swarm";
        if (name === "place") {
          return async () => {
            throw new NoCapacityError("No node has room for an instance needing 2.0 GiB");
          };
        }
        return async () => {
          calls.push(String(name));
          return name === "list" ? [] : undefined;
        };
      },
    },
  ) as AgentRuntime;
  setRuntime(stub);
  const { row } = await provisioned();
  await expect(provision(row.id)).rejects.toThrow(/no memory free to start/);
  expect(calls).not.toContain("ensureVolume");
  expect(calls).not.toContain("create");
  const after = await getInstance(row.id);
  expect(after?.observed_state).toBe("error");
  expect(after?.last_error).toMatch(/no memory free to start/);
});
