import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import postgres from "postgres";
import {
  freePort,
  startCluster,
  withDatabase,
} from "../app/server/platform/embedded-postgres.server.ts";
import { buildPlatformImage } from "../test/deploy/platform-image-build.ts";
import { API_CALL, deployPlatformStack } from "../test/deploy/platform-stack.ts";
import { waitFor } from "../test/helpers/wait-for.ts";
import { loadImage, startSwarmCluster } from "../test/runtime/swarm-cluster.ts";
import { removeRunObjects } from "./docker-run.ts";
import { type Child, root, startNode } from "./servers.ts";

// `npm run bench:swarm` (also part of `npm run bench`; BENCH_SWARM=0 skips it): the Swarm driver
// against the Docker driver in the same run (issue 19), the real gateway image at 1 CPU, one
// gateway at a time.
// 1. create + start → /healthz answering inside the container (probed by exec on both, so
//    neither waits for the image's 10 s HEALTHCHECK tick), three rounds alternating the drivers;
// 2. drain time per instance: two gateways on one node moved to the other by the worker's own
//    move (stop, copy the state volume, pin, start, healthy by the engine's check, remove the
//    source copy).
// 3. through the platform's API, cold (no pool, the dry run on): sign-up, provision → running
//    → first reply. Docker: this checkout's web and worker processes on this machine's engine;
//    Swarm: deploy/stack.yml deployed on the test swarm, called from inside a web replica (the
//    gateways' overlay is not reachable from here). The model is the local fake on both.
// The swarm is the tests' own: two dockerd in network namespaces of this machine (root,
// iproute2 and dockerd needed; skipped with a message otherwise). Part 3 needs `npm run build`.

const run = `bench-swarm-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-swarm-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const { SwarmRuntime } = await import("../worker/runtime/swarm.ts");
const { setRuntime } = await import("../worker/runtime/index.ts");
const { LABELS, limitsForPlan } = await import("../worker/runtime/types.ts");
const { DEPLOYMENT_LABEL, GATEWAY_PORT, STATE_DIR } = await import("../worker/instances/engine.ts");
type Runtime = InstanceType<typeof DockerRuntime> | InstanceType<typeof SwarmRuntime>;

const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const ROUNDS = Number(process.env.BENCH_SWARM_ROUNDS ?? 3);
const docker = new DockerRuntime({ maxCpus: 1 });

function missing(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root (network namespaces, dockerd per node)";
  for (const tool of ["ip", "dockerd", "nsenter"]) {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    } catch {
      return `${tool} is not installed`;
    }
  }
  return undefined;
}
const skip =
  missing() ??
  (await docker
    .ping()
    .then(async () => ((await docker.imageId(image)) ? undefined : `image ${image} is not built`))
    .catch((error: Error) => `no Docker engine (${error.message})`));

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** A gateway as the worker creates one: its volume, the plan's limits, the token, the overlay. */
function spec(n: number) {
  const instanceId = `ins_${run.replace(/-/g, "_")}_${n}`;
  return {
    instanceId,
    userId: `usr_${run}`,
    image,
    name: `agent-${instanceId}`,
    hostname: `agent-${instanceId}`.slice(0, 63),
    volume: `agent-${instanceId}-state`,
    volumeTarget: STATE_DIR,
    network: process.env.RUNTIME_NETWORK as string,
    limits: limitsForPlan("solo"),
    env: { OPENCLAW_GATEWAY_TOKEN: randomBytes(32).toString("hex") },
    labels: { [DEPLOYMENT_LABEL]: run },
    restartPolicy: "on-failure" as const,
  };
}

/** Creates and starts a gateway; resolves with its id once /healthz answers inside it. */
async function upAndHealthy(rt: Runtime, n: number): Promise<{ id: string; ms: number }> {
  const s = spec(n);
  const t0 = Date.now();
  await rt.ensureVolume(s.volume, { ...s.labels, [LABELS.instanceId]: s.instanceId }, s);
  const id = await rt.create(s);
  await rt.start(id);
  const probe = ["/bin/busybox", "wget", "-q", "-O", "/dev/null"];
  await waitFor(
    async () =>
      (await rt.exec(id, [...probe, `http://127.0.0.1:${GATEWAY_PORT}/healthz`])).exitCode === 0,
    { timeoutMs: 300_000, intervalMs: 250, what: `gateway ${n} healthy` },
  );
  return { id, ms: Date.now() - t0 };
}

async function removeGateway(rt: Runtime, id: string, n: number) {
  await rt.remove(id);
  await rt.removeVolume(spec(n).volume);
}

/** A call of the platform's API as a browser at its address makes it. */
type Call = (
  method: string,
  url: string,
  body?: unknown,
  cookie?: string,
) => Promise<{ status: number; body: Record<string, unknown>; cookie: string }>;

/** Sign-up, then provision → running → the first reply, each timed from the provision call. */
async function coldAgent(call: Call): Promise<{ runningMs: number; firstReplyMs: number }> {
  const email = `bench-${randomBytes(4).toString("hex")}@example.com`;
  const signup = await call("POST", "/api/register", {
    email,
    password: "a good long password",
    name: "Bench",
  });
  if (signup.status !== 201) throw new Error(`sign-up: ${JSON.stringify(signup)}`);
  const t0 = Date.now();
  const provisioned = await call("POST", "/api/agents/provision", { name: "Bench" }, signup.cookie);
  if (provisioned.status !== 201) throw new Error(`provision: ${JSON.stringify(provisioned)}`);
  const id = (provisioned.body.agent as { id: string }).id;
  await waitFor(
    async () => {
      const { body } = await call("GET", `/api/agents/${id}`, undefined, signup.cookie);
      const status = (body.agent as { status?: string } | undefined)?.status;
      if (status === "error") throw new Error(JSON.stringify(body));
      return status === "running";
    },
    { timeoutMs: 600_000, intervalMs: 500, what: "the agent running" },
  );
  const runningMs = Date.now() - t0;
  const chat = await call("POST", "/api/agent", { message: "Hello" }, signup.cookie);
  if (chat.status !== 200) throw new Error(`chat: ${JSON.stringify(chat)}`);
  return { runningMs, firstReplyMs: Date.now() - t0 };
}

const children: Child[] = [];
let pg: Awaited<ReturnType<typeof startCluster>> | undefined;

/** This checkout's web and worker on this machine's engine, a database and the fake model. */
async function platformOnDocker(gatewayIp: string | undefined): Promise<Call> {
  pg = await startCluster({
    dir: path.join(dataDir, "pg"),
    settings: { fsync: "off", synchronous_commit: "off" },
  });
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  await admin.unsafe("create database bench_swarm");
  await admin.end();
  const model = await startNode("bench/fake-openai.ts", await freePort(), "/v1/models");
  children.push(model);
  const port = await freePort();
  const common = {
    DATABASE_URL: withDatabase(pg.url, "bench_swarm"),
    SESSION_SECRET: randomBytes(32).toString("hex"),
    SEALING_KEY: randomBytes(32).toString("hex"),
    OPENAI_BASE_URL: `${model.url}/v1`,
    OPENAI_API_KEY: "",
    RUNTIME_DRIVER: "docker",
    RUNTIME_POOL_SIZE: "0",
    RUNTIME_MAX_CPUS: "1",
    DATA_DIR: dataDir,
    // Gateways reach the web's model endpoint at their bridge's address (a production web
    // process gets no loopback relay from the worker).
    HOST: "0.0.0.0",
    RUNTIME_PLATFORM_AI_URL: `http://${gatewayIp}:${port}/api/ai/v1`,
  };
  const web = await startNode("server.ts", port, "/api/health", common);
  children.push(web);
  // The worker: no port of its own to probe; PORT tells it where the web's AI endpoint is.
  children.push(await startNode("worker/index.ts", port, "/api/health", common));
  return async (method, url, body, cookie) => {
    const res = await fetch(`${web.url}${url}`, {
      method,
      headers: {
        origin: web.url,
        "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/140.0 Safari/537.36",
        ...(cookie ? { cookie } : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: "manual",
    });
    const text = await res.text();
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { text };
    }
    const set = res.headers.getSetCookie().map((c) => c.split(";")[0]);
    return { status: res.status, body: parsed, cookie: set.join("; ") };
  };
}

if (skip) {
  console.warn(`\nSwarm driver benchmark skipped: ${skip}`);
} else {
  const rows: Array<[string, string]> = [];
  // The gateway image, and the platform image when there is a build to measure, seeded into
  // the nodes where the engines allow it (decision 0186); else loaded.
  const t = Date.now();
  const built = existsSync(path.join(root, "build/index.js"));
  const platformImage = built ? await buildPlatformImage() : undefined;
  const cluster = await startSwarmCluster(2, {
    seed: platformImage ? [image, platformImage] : [image],
  });
  try {
    const loaded = await loadImage(cluster, image, new Docker());
    const seeded = JSON.stringify(cluster.seeded);
    console.warn(
      `swarm: 2 nodes up; gateway image seeded ${seeded}, loaded ${JSON.stringify(loaded)}` +
        ` (${secs(Date.now() - t)})`,
    );
    const swarm = new SwarmRuntime({
      host: cluster.manager.host,
      nodeEngines: cluster.nodeEngines,
      maxCpus: 1,
      settleMs: 120_000,
    });
    const { gatewayIp } = await docker.ensureNetwork(process.env.RUNTIME_NETWORK as string, {
      [DEPLOYMENT_LABEL]: run,
    });
    await swarm.ensureNetwork(process.env.RUNTIME_NETWORK as string, { [DEPLOYMENT_LABEL]: run });

    // 1. Alternating rounds, one gateway at a time.
    const took: Record<"docker" | "swarm", number[]> = { docker: [], swarm: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, rt] of [
        ["docker", docker],
        ["swarm", swarm],
      ] as const) {
        const n = round * 2 + (name === "swarm" ? 1 : 0);
        const { id, ms } = await upAndHealthy(rt, n);
        took[name].push(ms);
        await removeGateway(rt, id, n);
      }
    }
    const d = median(took.docker);
    const s = median(took.swarm);
    rows.push(
      [
        "Docker driver: create + start → /healthz",
        `${secs(d)} median (${took.docker.map(secs).join(", ")})`,
      ],
      [
        "Swarm driver: create + start → /healthz",
        `${secs(s)} median (${took.swarm.map(secs).join(", ")}), ${(s / d).toFixed(2)}× Docker`,
      ],
    );

    // 2. Drain: two gateways on the second node, moved one at a time to the manager.
    setRuntime(swarm);
    const { moveInstance } = await import("../worker/instances/drain.ts");
    const [managerId, otherId] = cluster.nodes.map((node) => node.nodeId) as [string, string];
    await swarm.setDraining(managerId, true); // placement puts both on the other node
    const placed = [await upAndHealthy(swarm, 100), await upAndHealthy(swarm, 101)];
    await swarm.setDraining(managerId, false);
    await swarm.setDraining(otherId, true);
    const moves: number[] = [];
    for (const p of placed) {
      if ((await swarm.nodeOf(p.id)) !== otherId) throw new Error("placed on the wrong node");
      const moved = await moveInstance(swarm, p.id, otherId, 300_000);
      if (!moved.ok) throw new Error(`move failed: ${moved.error}`);
      moves.push(moved.ms);
    }
    rows.push([
      "drain: one running gateway moved to the other node",
      `${secs(median(moves))} median (${moves.map(secs).join(", ")}): stop, copy, pin, start, healthy by the engine's 10 s check`,
    ]);
    await swarm.setDraining(otherId, false);
    for (const [i, p] of placed.entries()) await removeGateway(swarm, p.id, 100 + i);

    // 3. Through the API, cold, on each driver.
    if (!platformImage) {
      rows.push(["through the API", "skipped: run `npm run build` first"]);
    } else {
      const onDocker = await coldAgent(await platformOnDocker(gatewayIp));
      // Nothing of it runs on while the stack is measured.
      await Promise.all(children.splice(0).map((c) => c.stop()));
      await removeRunObjects(docker, DEPLOYMENT_LABEL, run, process.env.RUNTIME_NETWORK as string);
      const stack = await deployPlatformStack(cluster, {
        image: await loadImage(cluster, platformImage, new Docker()).then(() => platformImage),
        gatewayImage: image,
        operatorEmail: "operator@example.com",
      });
      let onSwarm: Awaited<ReturnType<typeof coldAgent>>;
      try {
        onSwarm = await coldAgent(async (method, url, body, cookie) =>
          JSON.parse(
            await stack.inWeb(API_CALL, {
              METHOD: method,
              URL_PATH: url,
              BODY: body === undefined ? "" : JSON.stringify(body),
              FORM: "",
              COOKIE: cookie ?? "",
            }),
          ),
        );
      } finally {
        await stack.remove();
      }
      const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}× Docker`;
      rows.push(
        ["API, cold: provision → running (Docker)", secs(onDocker.runningMs)],
        [
          "API, cold: provision → running (Swarm)",
          `${secs(onSwarm.runningMs)}, ${ratio(onSwarm.runningMs, onDocker.runningMs)}`,
        ],
        ["API, cold: provision → first reply (Docker)", secs(onDocker.firstReplyMs)],
        [
          "API, cold: provision → first reply (Swarm)",
          `${secs(onSwarm.firstReplyMs)}, ${ratio(onSwarm.firstReplyMs, onDocker.firstReplyMs)}`,
        ],
      );
    }
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await removeRunObjects(docker, DEPLOYMENT_LABEL, run, process.env.RUNTIME_NETWORK as string);
    await cluster.stop();
    await pg?.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
  console.warn(`\nSwarm driver against the Docker driver (${image}, 1 CPU, 2-node test swarm)\n`);
  for (const [k, v] of rows) console.warn(`${k.padEnd(52)} ${v}`);
}
