import { afterEach, expect, it } from "vitest";
import { watchPlatformOnce } from "../../worker/instances/platform-watch.ts";
import { type AgentRuntime, setRuntime } from "../../worker/runtime/index.ts";

// The worker's watch of the platform's containers on Swarm (decision 0201): a web replica
// started since the last pass, or one gone (it may have held an overlay's host address), makes
// the platform join the gateways' overlays at once, not at the next reconcile; an unchanged set
// costs one listing and nothing else.

afterEach(() => setRuntime(undefined));

/** A driver whose running platform containers the test sets, counting the joins asked for. */
function fakeSwarm(containers: string[][]) {
  const joins: Array<Record<string, string>> = [];
  let pass = 0;
  const runtime = {
    driver: "swarm",
    platformContainers: async () => [
      ...(containers[Math.min(pass++, containers.length - 1)] ?? []),
    ],
    attachPlatform: async (labels: Record<string, string>) => {
      joins.push(labels);
      return 1;
    },
  } as unknown as AgentRuntime;
  setRuntime(runtime);
  return joins;
}

it("joins the platform's containers when their set changes, and only then", async () => {
  const joins = fakeSwarm([
    ["web1", "worker"],
    ["worker", "web1"],
    ["web1", "web2", "worker"],
    ["web2", "worker"],
  ]);
  let last = await watchPlatformOnce(undefined); // the worker's start: joined once
  expect(joins).toHaveLength(1);
  expect(joins[0]).toMatchObject({ "agent-platform.role": "gateway-network" });
  last = await watchPlatformOnce(last); // the same set, listed in another order
  expect(joins).toHaveLength(1);
  last = await watchPlatformOnce(last); // a new web replica
  expect(joins).toHaveLength(2);
  last = await watchPlatformOnce(last); // one gone (it may have held a host address)
  expect(joins).toHaveLength(3);
  expect(last).toBe("web2,worker");
});

it("does nothing on a driver without platform containers", async () => {
  setRuntime({ driver: "docker" } as unknown as AgentRuntime);
  expect(await watchPlatformOnce(undefined)).toBeUndefined();
});

it("tries again at the next pass when joining failed", async () => {
  let fail = true;
  setRuntime({
    driver: "swarm",
    platformContainers: async () => ["web1"],
    attachPlatform: async () => {
      if (fail) throw new Error("engine down");
      return 1;
    },
  } as unknown as AgentRuntime);
  await expect(watchPlatformOnce(undefined)).rejects.toThrow("engine down");
  fail = false;
  expect(await watchPlatformOnce(undefined)).toBe("web1");
});
