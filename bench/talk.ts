import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import WebSocket from "ws";
import { freePort } from "../app/server/platform/embedded-postgres.server.ts";
import { startBenchDatabase } from "./bench-database.ts";
import { containerCpuMs, mib, sampleMemory } from "./container-memory.ts";
import { removeRunObjects } from "./docker-run.ts";
import { agentPoster, startNode } from "./servers.ts";

// `npm run bench` (after the runtime part; BENCH_TALK=0 skips it): the platform's added latency
// for one chat turn with a real gateway — POST /api/agent and the live agent socket — against
// sending the same message straight to the gateway (chat.send over its control protocol), same
// run, medians as ratios. The gateway's model is the platform's AI endpoint, served by the real
// web process and answered by the local fake provider, so both paths pay the same model time.
// Then the used gateway at rest (issue 23's 600 MiB): its memory right after the turns and
// BENCH_TALK_REST_S (default 120) seconds later, and what the next turn costs after that rest
// in time and in the gateway's CPU (OpenClaw retires its idle worker threads within ~a minute;
// the next turn starts them again).

const TURNS = Number(process.env.BENCH_TALK_TURNS ?? 10);
const REST_S = Number(process.env.BENCH_TALK_REST_S ?? 120);
const TARGET_MIB = 600;
const run = `bench-talk-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-talk-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
process.env.RUNTIME_MAX_CPUS = "1";
// The bench seals the instance's secrets and signs the session; the web process reads them.
process.env.SEALING_KEY = randomBytes(32).toString("hex");
process.env.SESSION_SECRET = randomBytes(32).toString("hex");

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const { setRuntime } = await import("../worker/runtime/index.ts");
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rt = new DockerRuntime({ maxCpus: 1 });
const skip = await rt
  .ping()
  .then(async () => ((await rt.imageId(image)) ? undefined : `image ${image} is not built`))
  .catch((error: Error) => `no Docker engine (${error.message})`);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

if (skip) {
  console.warn(`\nchat-turn benchmark skipped: ${skip}`);
} else {
  setRuntime(rt);
  const database = await startBenchDatabase("talk");
  const { databaseUrl } = database;
  const { db, closeDb } = await import("../app/server/platform/db.server.ts");
  const { resetEnvCache } = await import("../app/server/platform/env.server.ts");
  const { ensureInstanceRecord, getInstance } = await import(
    "../app/server/agents/instances.server.ts"
  );
  const { createSession } = await import("../app/server/accounts/sessions.server.ts");
  const { runTurn } = await import("../app/server/agents/talk.server.ts");
  const { DEPLOYMENT_LABEL } = await import("../worker/instances/engine.ts");
  const { provision } = await import("../worker/instances/provision.ts");
  const { connectPaired } = await import("../worker/instances/pairing.ts");
  const volumes: string[] = [];
  const children: Array<{ stop(): Promise<void> }> = [];
  let figures: { direct: number; api: number; socket: number } | undefined;
  let rest:
    | {
        busy: number;
        rested: number;
        nextTurn: number;
        nextTurnCpu: number;
        turnCpu: number;
      }
    | undefined;
  try {
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK as string, {
      [DEPLOYMENT_LABEL]: run,
    });
    const provider = await startNode("bench/fake-openai.ts", await freePort(), "/v1/models");
    children.push(provider);
    // The web on every interface: the gateway reaches its AI endpoint at the bridge address.
    const port = await freePort();
    const web = await startNode("server.ts", port, "/api/health", {
      HOST: "0.0.0.0",
      DATABASE_URL: databaseUrl,
      OPENAI_BASE_URL: `${provider.url}/v1`,
      OPENAI_API_KEY: "bench",
      SEALING_KEY: process.env.SEALING_KEY,
      SESSION_SECRET: process.env.SESSION_SECRET,
      RATE_LIMIT_SCALE: "1000",
    });
    children.push(web);
    process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${port}/api/ai/v1`;
    resetEnvCache();

    const userId = `usr_${run.replace(/-/g, "_")}`;
    await db()`insert into users (id, email, name, referral_code)
      values (${userId}, ${`${run}@example.com`}, 'bench', ${run
        .replace(/[^a-z0-9]/gi, "")
        .slice(-20)
        .toUpperCase()})`;
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
      values (${`led_${run}`}, ${userId}, ${1_000_000_000}, 'bench')`;
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${`agt_${randomBytes(10).toString("hex")}`}, ${userId}, 'Bench', 'main',
              'openai/gpt-4o-mini', 'starter')`;
    const cookie = (await createSession(userId)).setCookie.split(";")[0] as string;
    const row = await ensureInstanceRecord(userId, { plan: "solo", model: "openai/gpt-4o-mini" });
    volumes.push(row.volume_name);
    await provision(row.id);
    const instance = await getInstance(row.id);
    if (!instance?.gateway_address) throw new Error("the gateway has no address");
    const direct = await connectPaired(instance, instance.gateway_address);

    const postAgent = agentPoster(web.url, cookie);
    const socket = new WebSocket(`ws://127.0.0.1:${port}/agent/${userId}`, {
      headers: { cookie },
    });
    const frames: Array<Record<string, unknown>> = [];
    const waiters: Array<() => void> = [];
    socket.on("message", (data) => {
      frames.push(JSON.parse(String(data)));
      for (const wake of waiters.splice(0)) wake();
    });
    const nextFrame = async (match: (f: Record<string, unknown>) => boolean, from: number) => {
      for (;;) {
        const found = frames.slice(from).find(match);
        if (found) return found;
        await new Promise<void>((r) => waiters.push(r));
      }
    };
    await nextFrame((f) => f.type === "ready", 0);

    const times = { direct: [] as number[], api: [] as number[], socket: [] as number[] };
    try {
      const { key } = await direct.client.request<{ key: string }>("sessions.create", {
        agentId: "main",
      });
      const { sessionId } = await postAgent({ action: "create-session" });
      // The first turn of a session prepares its workspace: warm both paths up (a gateway
      // fresh from boot may fail its very first run; that is not what is measured).
      const warm = async (turn: () => Promise<unknown>) => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await turn();
          } catch (error) {
            if (attempt >= 3) throw error;
            console.warn(`warm-up turn failed (${(error as Error).message}); again`);
          }
        }
      };
      await warm(() => runTurn(direct.client, key, "warm up"));
      await warm(() => postAgent({ message: "warm up", sessionId }));
      for (let i = 0; i < TURNS; i++) {
        let t = performance.now();
        await runTurn(direct.client, key, `direct ${i}`);
        times.direct.push(performance.now() - t);

        t = performance.now();
        await postAgent({ message: `api ${i}`, sessionId });
        times.api.push(performance.now() - t);

        t = performance.now();
        const from = frames.length;
        socket.send(JSON.stringify({ type: "chat", id: `b${i}`, message: `ws ${i}`, sessionId }));
        const end = await nextFrame((f) => f.type === "final" || f.type === "error", from);
        if (end.type === "error") throw new Error(`socket turn failed: ${end.error}`);
        times.socket.push(performance.now() - t);
      }
      const containerId = instance.container_id;
      if (containerId) {
        // The gateway's CPU for one turn in the run of turns, for the next turn's comparison.
        let cpu = await containerCpuMs(rt, containerId);
        await runTurn(direct.client, key, "one more");
        const turnCpu = (await containerCpuMs(rt, containerId)) - cpu;
        const busy = await sampleMemory(rt, containerId, "after the turns");
        console.warn(`the gateway rests ${REST_S} s`);
        await new Promise((r) => setTimeout(r, REST_S * 1000));
        const rested = await sampleMemory(rt, containerId, "at rest");
        cpu = await containerCpuMs(rt, containerId);
        const t = performance.now();
        await runTurn(direct.client, key, "after the rest");
        const nextTurn = performance.now() - t;
        const nextTurnCpu = (await containerCpuMs(rt, containerId)) - cpu;
        rest = {
          turnCpu,
          nextTurnCpu,
          busy: busy.stats,
          rested: rested.stats,
          nextTurn,
        };
      }
    } finally {
      direct.client.close();
      socket.close();
    }
    const d = median(times.direct);
    figures = {
      direct: d,
      api: median(times.api),
      socket: median(times.socket),
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await removeRunObjects(
      rt,
      DEPLOYMENT_LABEL,
      run,
      process.env.RUNTIME_NETWORK as string,
      volumes,
    );
    await closeDb();
    await database.stop();
  }
  if (figures) {
    const row = (name: string, ms: number) =>
      console.warn(
        `${name.padEnd(36)} ${ms.toFixed(0).padStart(6)} ms   ${(ms / (figures?.direct ?? 1)).toFixed(2)}×`,
      );
    console.warn(
      `\nOne chat turn with the real gateway (${image}, ${TURNS} turns, medians, load ${os.loadavg()[0]?.toFixed(1)})\n`,
    );
    row("chat.send straight to the gateway", figures.direct);
    row("POST /api/agent", figures.api);
    row("live agent socket", figures.socket);
    if (rest) {
      console.warn(
        `\nThe used gateway at rest (target ≤ ${TARGET_MIB} MiB, docker stats figure): ${mib(rest.busy)} MiB after the turns, ${mib(rest.rested)} MiB ${REST_S} s later (${rest.rested <= TARGET_MIB * 1024 ** 2 ? "met" : "not met"})`,
      );
      row("next turn (chat.send) after the rest", rest.nextTurn);
      console.warn(
        `gateway CPU for a turn: ${rest.turnCpu.toFixed(0)} ms in the run of turns, ${rest.nextTurnCpu.toFixed(0)} ms for the one after the rest`,
      );
    }
  }
}
await rm(dataDir, { recursive: true, force: true });
