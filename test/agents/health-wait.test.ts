import { createServer } from "node:net";
import { afterEach, expect, it } from "vitest";
import { waitHealthy } from "../../worker/instances/health.ts";
import { type AgentRuntime, type ContainerInfo, setRuntime } from "../../worker/runtime/index.ts";

// Docker reports a container between two restarts of its restart policy as running most of the
// time (the "restarting" window is 100 ms at first): a wait that sampled the state alone missed
// a gateway crashing at boot on a loaded host and sat out its whole bound (an update's rollback
// test timed out in CI). A restart with an error exit since the wait began is a crash.

afterEach(() => setRuntime(undefined));

/** A loopback port that refuses connections: a gateway that never answers /healthz. */
async function refusingEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `127.0.0.1:${port}`;
}

const container = (endpoint: string, restartCount: number, exitCode: number): ContainerInfo => ({
  id: "ctr_crashing",
  name: "agent-ins_crashing",
  image: "agent-gateway:test",
  imageId: "sha256:test",
  state: "running",
  running: true,
  health: undefined,
  oomKilled: false,
  exitCode,
  restartCount,
  startedAt: new Date().toISOString(),
  finishedAt: undefined,
  labels: {},
  address: undefined,
  endpoint,
  ports: {},
  hostname: "crashing",
  limits: { memoryBytes: 0, cpuShares: 0, nanoCpus: 0, pidsLimit: 0 },
  security: { init: true, capDrop: ["ALL"], securityOpt: [], readOnly: false },
  restartPolicy: "unless-stopped",
  env: [],
  mounts: [],
});

it("fails as soon as the container has crashed and been restarted, though it shows as running", async () => {
  const endpoint = await refusingEndpoint();
  let inspections = 0;
  setRuntime({
    driver: "docker",
    // Running at every sample; from the second sample on, after a restart with exit 1.
    inspect: async () => {
      inspections += 1;
      return inspections === 1 ? container(endpoint, 0, 0) : container(endpoint, 1, 1);
    },
    logs: async () => "gateway starting\nInvalid config: gateway.port must be a number\n",
  } as unknown as AgentRuntime);
  // The error says why, in the gateway's own last line.
  await expect(waitHealthy(container(endpoint, 0, 0), 20_000)).rejects.toThrow(
    /stopped before \/healthz answered \(exit 1, restarted\); its last output: Invalid config: gateway.port must be a number$/,
  );
  expect(inspections).toBe(2);
});

it("keeps waiting for a container that runs without a restart, until the bound", async () => {
  const endpoint = await refusingEndpoint();
  setRuntime({
    driver: "docker",
    // An earlier crash (before the wait) is not this start's: the count does not rise.
    inspect: async () => container(endpoint, 3, 1),
  } as unknown as AgentRuntime);
  await expect(waitHealthy(container(endpoint, 3, 1), 600)).rejects.toThrow(
    /no \/healthz within 600 ms/,
  );
});
