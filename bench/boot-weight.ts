import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createBenchGateway, removeRunObjects } from "./docker-run.ts";

// `npm run bench:boot-weight` (also a part of `npm run bench`; BENCH_BOOT_WEIGHT=0 leaves it
// out): what a booting gateway's CPU weight (decision 0250) buys on a busy host. One gateway is
// booted the way the worker boots one (the driver's create with the plan's limits and the
// platform's initial config, weighForBoot, start) and timed to /healthz: first on the idle host,
// then with BENCH_BOOT_NEIGHBOURS (default 4) containers of the same plan burning CPU beside it,
// at the plan's weight (BOOT_CPU_WEIGHT=1) and at a boot weight (BOOT_CPU_WEIGHT, here 8 unless set), taking turns
// (BENCH_BOOT_ROUNDS each, default 2). Figures as ratios against the plan's weight in the same
// run; the neighbours' CPU during each boot beside them (what the weight takes from them).
// Skipped with a message when no Docker engine answers or the image is not built.

const run = `bench-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-bootw-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
const WEIGHT = Number(process.env.BOOT_CPU_WEIGHT ?? 8);
const NEIGHBOURS = Number(process.env.BENCH_BOOT_NEIGHBOURS ?? 4);
const ROUNDS = Number(process.env.BENCH_BOOT_ROUNDS ?? 2);

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const { setRuntime } = await import("../worker/runtime/index.ts");
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rt = new DockerRuntime();
const skip = await rt
  .ping()
  .then(async () => ((await rt.imageId(image)) ? undefined : `image ${image} is not built`))
  .catch((error: Error) => `no Docker engine (${error.message})`);

/** CPU seconds a container has used: its cgroup's cpuacct.usage (v1, ns) or cpu.stat (v2, µs). */
async function cpuSeconds(id: string): Promise<number> {
  const { stdout } = await rt.exec(id, [
    "sh",
    "-c",
    "if [ -r /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then echo ns $(cat /sys/fs/cgroup/cpuacct/cpuacct.usage); else echo us $(sed -n 's/^usage_usec //p' /sys/fs/cgroup/cpu.stat); fi",
  ]);
  const [unit, value] = stdout.trim().split(" ");
  return Number(value) / (unit === "ns" ? 1e9 : 1e6);
}

if (skip) {
  console.warn(`\nboot weight benchmark skipped: ${skip}`);
} else {
  setRuntime(rt);
  const { weighForBoot } = await import("../worker/instances/boot-weight.ts");
  const { DEPLOYMENT_LABEL, GATEWAY_PORT } = await import("../worker/instances/engine.ts");
  const { gatewayHealthy } = await import("../app/server/openclaw/health.server.ts");
  const { env, resetEnvCache } = await import("../app/server/platform/env.server.ts");
  const labels = { [DEPLOYMENT_LABEL]: run };
  const plan = { id: `ins_${run}`, plan: "solo" };
  let n = 0;

  const create = (cmd?: string[]) => {
    n += 1;
    return createBenchGateway(rt, { run, name: `agent-${run}-${n}`, image, labels, cmd });
  };

  /** One boot to /healthz with BOOT_CPU_WEIGHT=`weight`; the gateway is removed after. */
  const boot = async (weight: number) => {
    process.env.BOOT_CPU_WEIGHT = String(weight);
    resetEnvCache();
    const id = await create();
    const t0 = Date.now();
    await weighForBoot(plan, id);
    await rt.start(id);
    try {
      for (;;) {
        const info = await rt.inspect(id);
        if (!info?.running) throw new Error("the gateway stopped while starting");
        if (info.address && (await gatewayHealthy(`${info.address}:${GATEWAY_PORT}`, 2_000))) {
          return { ms: Date.now() - t0, shares: info.limits.cpuShares };
        }
        if (Date.now() - t0 > 600_000) throw new Error("not healthy in 600 s");
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await rt.remove(id);
    }
  };

  const load = async () => (await readFile("/proc/loadavg", "utf8")).split(" ")[0];
  const lines: string[] = [];
  try {
    await rt.ensureNetwork(env().RUNTIME_NETWORK, labels);
    const idle = await boot(WEIGHT);
    lines.push(`idle host: ${(idle.ms / 1000).toFixed(1)} s to /healthz`);
    const hogs: string[] = [];
    for (let i = 0; i < NEIGHBOURS; i++) {
      const id = await create(["sh", "-c", "while :; do :; done"]);
      await rt.start(id);
      hogs.push(id);
    }
    const hogCpu = async () => {
      let sum = 0;
      for (const id of hogs) sum += await cpuSeconds(id);
      return sum;
    };
    const figures: Record<string, number[]> = { plan: [], boot: [] };
    const taken: Record<string, number[]> = { plan: [], boot: [] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const [kind, weight] of [
        ["plan", 1],
        ["boot", WEIGHT],
      ] as const) {
        const before = await hogCpu();
        const t0 = Date.now();
        const { ms, shares } = await boot(weight);
        // The neighbours' CPU per wall second while the gateway booted beside them.
        const rate = ((await hogCpu()) - before) / ((Date.now() - t0) / 1000);
        figures[kind]?.push(ms);
        taken[kind]?.push(rate);
        lines.push(
          `${NEIGHBOURS} busy neighbours, weight ${shares} shares: ${(ms / 1000).toFixed(1)} s to /healthz; neighbours used ${rate.toFixed(2)} CPUs meanwhile (load ${await load()})`,
        );
      }
    }
    const mean = (xs: number[] = []) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
    const ratio = mean(figures.boot) / mean(figures.plan);
    lines.push(
      `boot to /healthz beside ${NEIGHBOURS} busy neighbours: ×${ratio.toFixed(2)} with weight ${WEIGHT} against the plan's (${(mean(figures.boot) / 1000).toFixed(1)} s against ${(mean(figures.plan) / 1000).toFixed(1)} s; idle host ${(idle.ms / 1000).toFixed(1)} s)`,
      `neighbours' CPU during the boot: ×${(mean(taken.boot) / mean(taken.plan)).toFixed(2)} with the boot's weight against the plan's`,
    );
  } finally {
    await removeRunObjects(rt, DEPLOYMENT_LABEL, run, env().RUNTIME_NETWORK);
    await rm(dataDir, { recursive: true, force: true });
  }
  console.warn(`\nboot CPU weight (decision 0250), ${os.cpus().length} CPUs, ${image}`);
  for (const line of lines) console.warn(`  ${line}`);
}
