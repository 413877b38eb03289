import { afterAll, beforeAll, expect, it } from "vitest";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { GATEWAY_PORT } from "../../worker/instances/engine.ts";
import { waitHealthy } from "../../worker/instances/health.ts";
import {
  stopKeepingSlots,
  tryTakeNodeSlot,
  withNodeSlot,
} from "../../worker/instances/node-slots.ts";
import { type ContainerInfo, DockerRuntime, setRuntime } from "../../worker/runtime/index.ts";
import {
  allowDockerNetworks,
  buildImage,
  cleanupTestObjects,
  describeDocker,
  GATEWAY_IMAGE,
  testLabels,
  testRun,
  waitFor,
} from "./docker-support.ts";

// A boot slot outlives its caller's bound while the gateway still boots (decision 0249). The
// soak's gateways went on booting after their 60 s lifecycle bound, and the slot given back at
// the bound let the next boot start beside them on the same starved cores: five boots at once,
// each `starting` for minutes. A stand-in whose /healthz answers once the test touches a file,
// one slot on the node: the slot stays taken past the bound until the gateway answers or stops.

const LATE_IMAGE = "agent-platform-test-late-healthz:1";
const server = `require("http").createServer((q,s)=>{const ok=q.url==="/healthz"&&require("fs").existsSync("/tmp/ready");s.statusCode=ok?200:503;s.end()}).listen(${GATEWAY_PORT},"0.0.0.0")`;
let rt: DockerRuntime;

/** Runs at once: nobody else is in this node's line. */
const line = { place: async () => 0, pollMs: () => 50 };

async function lateGateway(name: string): Promise<ContainerInfo> {
  const container = await rt.docker.createContainer({
    name: `agent-test-${testRun}-${name}`,
    Image: LATE_IMAGE,
    Labels: testLabels(),
  });
  await container.start();
  return (await rt.inspect(container.id)) as ContainerInfo;
}

/** A boot whose caller gives up after 1 s. */
async function bootPastItsBound(info: ContainerInfo) {
  await expect(withNodeSlot("host", line, () => waitHealthy(info, 1_000))).rejects.toThrow(
    /no \/healthz within 1000 ms/,
  );
}

const slotFreed = () =>
  waitFor(() => tryTakeNodeSlot("host"), { timeoutMs: 30_000, what: "the slot given back" });

describeDocker("a boot slot kept past its caller's bound", () => {
  beforeAll(() => {
    process.env.WAKE_CONCURRENCY = "1";
    resetEnvCache();
    rt = new DockerRuntime({ maxCpus: 1 });
    setRuntime(rt);
    allowDockerNetworks();
    buildImage(LATE_IMAGE, GATEWAY_IMAGE, [
      `CMD ["node", "-e", ${JSON.stringify(server)}]`,
      "HEALTHCHECK NONE",
    ]);
  });

  afterAll(async () => {
    stopKeepingSlots();
    await cleanupTestObjects(rt);
    setRuntime(undefined);
    delete process.env.WAKE_CONCURRENCY;
    resetEnvCache();
  });

  it("stays taken while the gateway boots on, and is free once it answers", async () => {
    const info = await lateGateway("late");
    await bootPastItsBound(info);
    expect(await tryTakeNodeSlot("host")).toBeUndefined();
    await rt.exec(info.id, ["touch", "/tmp/ready"]);
    await (await slotFreed())();
  });

  it("is free once the still-booting gateway stops", async () => {
    const info = await lateGateway("stops");
    await bootPastItsBound(info);
    expect(await tryTakeNodeSlot("host")).toBeUndefined();
    await rt.docker.getContainer(info.id).kill();
    await (await slotFreed())();
  });

  it("is given back at once when the boot fails any other way", async () => {
    await expect(
      withNodeSlot("host", line, async () => {
        throw new Error("the engine refused the start");
      }),
    ).rejects.toThrow(/refused/);
    const release = await tryTakeNodeSlot("host");
    expect(release).toBeDefined();
    await release?.();
  });
});
