import { randomBytes } from "node:crypto";
import type Docker from "dockerode";
import { DockerRuntime } from "../worker/runtime/docker.ts";

// `npm run bench:networks`: what a network per gateway costs (decision 0195), in one run.
// 1. A container created and started on the shared bridge against the same on a network of its
//    own made just before (the network's creation included), alternating, ROUNDS each: the
//    ratio of medians is what a cold provisioning pays more (a pooled gateway's network is made
//    with it, before any tenant waits).
// 2. TENANT_NETWORKS (default 200) gateway networks on one engine: how many the engine then
//    holds, and the create time of the first ten against the last ten.
// Needs a Docker engine and the gateway image; everything it makes carries the run's label and
// is removed at the end.

const ROUNDS = Number(process.env.ROUNDS ?? 10);
const NETWORKS = Number(process.env.TENANT_NETWORKS ?? 200);
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const run = `bench-${randomBytes(3).toString("hex")}`;
const label = "agent-platform.bench";
const labels = { [label]: run };
const rt = new DockerRuntime();

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function startOn(network: string, name: string): Promise<void> {
  const container: Docker.Container = await rt.docker.createContainer({
    name,
    Image: image,
    Entrypoint: ["sleep"],
    Cmd: ["3600"],
    Labels: labels,
    HostConfig: { NetworkMode: network, Init: true },
  });
  await container.start();
}

async function cleanup(): Promise<void> {
  const filters = { label: [`${label}=${run}`] };
  for (const c of await rt.docker.listContainers({ all: true, filters })) {
    await rt.docker.getContainer(c.Id).remove({ force: true });
  }
  for (const n of await rt.docker.listNetworks({ filters })) {
    await rt.docker.getNetwork(n.Id).remove();
  }
}

const skip = await rt
  .ping()
  .then(async () => ((await rt.imageId(image)) ? undefined : `image ${image} is not built`))
  .catch((error: Error) => `no Docker engine (${error.message})`);
if (skip) {
  console.warn(`tenant network benchmark skipped: ${skip}`);
} else {
  try {
    const shared = `${run}-shared`;
    await rt.ensureNetwork(shared, labels);
    const onShared: number[] = [];
    const onOwn: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      onShared.push(await timed(() => startOn(shared, `${run}-s${i}`)));
      onOwn.push(
        await timed(async () => {
          await rt.ensureIsolatedNetwork(`${run}-own${i}`, labels);
          await startOn(`${run}-own${i}`, `${run}-o${i}`);
        }),
      );
    }
    await cleanup();
    console.warn(
      `container create + start, median of ${ROUNDS}: shared bridge ${median(onShared).toFixed(0)} ms, ` +
        `own network (made first) ${median(onOwn).toFixed(0)} ms: ${(median(onOwn) / median(onShared)).toFixed(2)}x`,
    );

    const before = (await rt.docker.listNetworks()).length;
    const creates: number[] = [];
    for (let i = 0; i < NETWORKS; i++) {
      creates.push(await timed(() => rt.ensureIsolatedNetwork(`${run}-t${i}`, labels)));
    }
    const held = (await rt.docker.listNetworks()).length;
    const first = median(creates.slice(0, 10));
    const last = median(creates.slice(-10));
    console.warn(
      `${NETWORKS} gateway networks: the engine holds ${held} networks (${before} before); ` +
        `create median ${first.toFixed(0)} ms for the first ten, ${last.toFixed(0)} ms for the last ten: ${(last / first).toFixed(2)}x`,
    );
  } finally {
    await cleanup();
  }
}
