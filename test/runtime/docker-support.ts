import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { http, passthrough, ws } from "msw";
import { describe } from "vitest";
import { GATEWAY_PORT } from "../../worker/instances/engine.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { LABELS } from "../../worker/runtime/types.ts";
import { mswServer } from "../msw/server.ts";
import { gatewayBuildFinished } from "../setup/gateway-build.ts";

// Docker-backed tests run against the real engine. Without one they are skipped with the reason,
// unless CI=true or REQUIRE_DOCKER=1: then they run and fail (a CI without Docker must not pass).

export const GATEWAY_IMAGE = process.env.AGENT_GATEWAY_IMAGE_TAG ?? "agent-gateway:2026.9.6";
export const TEST_LABEL = "agent-platform.test";
/** Marks everything one test file creates, so cleanup finds it even after a crash. */
export const testRun = `t${process.pid}-${randomBytes(3).toString("hex")}`;

export const dockerRequired = process.env.CI === "true" || process.env.REQUIRE_DOCKER === "1";

async function probe(): Promise<string | undefined> {
  // On CI the image may still be building while the first files run (.ci/run).
  await gatewayBuildFinished();
  const rt = new DockerRuntime();
  try {
    await rt.ping();
  } catch (error) {
    return `no Docker engine answers (${(error as Error).message})`;
  }
  if (!(await rt.imageId(GATEWAY_IMAGE)))
    return `image ${GATEWAY_IMAGE} is not built (gateway/build.sh)`;
  return undefined;
}

export const dockerMissing = await probe();

/** `describe` that needs Docker: skipped locally without it, failing when Docker is required. */
export function describeDocker(name: string, fn: () => void): void {
  if (!dockerMissing) {
    describe(name, fn);
  } else if (dockerRequired) {
    describe(name, fn); // its tests run and fail on the missing engine or image
  } else {
    describe.skip(`${name} [skipped: ${dockerMissing}; set REQUIRE_DOCKER=1 to fail instead]`, fn);
  }
}

/** Removes every container, volume and network this run created (test or deployment label). */
export async function cleanupTestObjects(rt: DockerRuntime, run = testRun): Promise<void> {
  for (const label of [`${TEST_LABEL}=${run}`, `agent-platform.deployment=${run}`]) {
    const filters = { label: [label] };
    const containers = await rt.docker.listContainers({ all: true, filters });
    await Promise.all(
      containers.map((c) =>
        rt.docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => {}),
      ),
    );
    const { Volumes } = await rt.docker.listVolumes({ filters });
    await Promise.all(
      (Volumes ?? []).map((v) =>
        rt.docker
          .getVolume(v.Name)
          .remove({ force: true })
          .catch(() => {}),
      ),
    );
    const networks = await rt.docker.listNetworks({ filters });
    await Promise.all(
      networks.map((n) =>
        rt.docker
          .getNetwork(n.Id)
          .remove()
          .catch(() => {}),
      ),
    );
  }
}

export const testLabels = (): Record<string, string> => ({
  [TEST_LABEL]: testRun,
  [LABELS.managed]: "1",
});

export { waitFor } from "../helpers/wait-for.ts";

/**
 * Builds `tag` from `from` plus Dockerfile `lines` (classic builder, no pull, no context) and
 * returns the new image's id. Building the same tag again moves the tag, as gateway/build.sh does.
 */
export function buildImage(tag: string, from: string, lines: string[]): string {
  return execFileSync("docker", ["build", "-q", "-t", tag, "-"], {
    input: `FROM ${from}\n${lines.join("\n")}\n`,
    env: { ...process.env, DOCKER_BUILDKIT: "0" },
    stdio: ["pipe", "pipe", "pipe"],
    encoding: "utf8",
  }).trim();
}

/** Removes images by tag or id, whatever is left of them (test cleanup). */
export function removeImages(...images: string[]): void {
  try {
    execFileSync("docker", ["rmi", "-f", ...images], { stdio: "ignore" });
  } catch {
    // some were gone already
  }
}

/**
 * A light stand-in for the gateway image: the same image with `sleep` as its command, so
 * lifecycle tests run containers without starting a gateway (built locally, no pull).
 */
export const SLEEPER_IMAGE = "agent-platform-test-sleeper:1";
export function ensureSleeperImage(): string {
  buildImage(SLEEPER_IMAGE, GATEWAY_IMAGE, ['CMD ["sleep", "3600"]', "HEALTHCHECK NONE"]);
  return SLEEPER_IMAGE;
}

/**
 * Dockerfile lines of a stand-in that answers the gateway's `/healthz` (a tiny Node server on
 * the gateway port) and speaks no gateway protocol: lifecycle steps that wait for health take
 * seconds instead of a gateway boot.
 */
export const HEALTHZ_LINES = [
  `CMD ["node", "-e", ${JSON.stringify(`require("http").createServer((q,s)=>{s.statusCode=q.url==="/healthz"?200:404;s.end("ok")}).listen(${GATEWAY_PORT},"0.0.0.0")`)}]`,
  "HEALTHCHECK NONE",
];
export const HEALTHZ_IMAGE = "agent-platform-test-healthz:1";
export function ensureHealthzImage(): string {
  buildImage(HEALTHZ_IMAGE, GATEWAY_IMAGE, HEALTHZ_LINES);
  return HEALTHZ_IMAGE;
}

/**
 * Whether a gateway must freeze into swap here (decision 0178): the host has swap and the engine
 * cgroup v1 with swap accounting, or this is CI, whose .ci/run turns swap on.
 */
export async function freezeExpected(rt: DockerRuntime): Promise<boolean> {
  if (process.env.CI) return true;
  const swapOn = (await readFile("/proc/swaps", "utf8")).trim().split("\n").length > 1;
  const info = (await rt.docker.info()) as { CgroupVersion?: string; SwapLimit?: boolean };
  return swapOn && info.CgroupVersion !== "2" && info.SwapLimit !== false;
}

/** Gateways live on Docker bridge networks (private ranges): their HTTP and WebSocket are real. */
export function allowDockerNetworks(): void {
  const bridge = /^(http|ws):\/\/(10\.\d+|172\.(1[6-9]|2\d|3[01])|192\.168)\.\d+\.\d+:\d+/;
  mswServer.use(
    http.all(bridge, () => passthrough()),
    ws.link(bridge).addEventListener("connection", ({ server }) => server.connect()),
  );
}
