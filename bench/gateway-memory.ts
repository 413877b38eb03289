import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { type MemorySample, mib, sampleMemory } from "./container-memory.ts";
import { createBenchGateway, removeRunObjects } from "./docker-run.ts";

// `npm run bench:gateway-memory` (also `BENCH_ONLY=gateway-memory npm run bench`, and a part of
// `npm run bench`): what ONE idle gateway holds (issue 23: at most 600 MiB, stretch 400 MiB).
// The gateway is created the way the worker creates it (the runtime driver's create: same env,
// plan limits, the platform's initial config written into an empty volume), then sampled when
// healthy and after idle periods: the cgroup's figures (what `docker stats` shows: usage less
// the reclaimable inactive page cache; and the raw usage, which counts the page cache of the
// image files the gateway read) and the resident memory of the processes inside.
// Gateways are measured one after another, never two at once.
// Env: BENCH_GATEWAY_IDLE_SECONDS (default "60,120": sample times after healthy),
//      BENCH_GATEWAY_VARIANTS (a JSON file: [{name, env?, config?}], each measured in turn;
//      env is added to the container's, config merged into the initial config, cmd replaces
//      the image's command),
//      AGENT_GATEWAY_IMAGE (default agent-gateway:2026.9.6),
//      BENCH_GATEWAY_FREEZE=1 (then frozen as the platform freezes it) or =gc (a full GC through
//      the inspector first): its memory by kind awake and frozen, the pool's growth, the thaw
//      (bench/freeze-lever.ts).
// Skipped with a message when no Docker engine answers or the image is not built.

const TARGET_MIB = 600;
const STRETCH_MIB = 400;

const run = `bench-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-gwmem-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
process.env.RUNTIME_MAX_CPUS = "1";

const Variant = z.object({
  name: z.string(),
  env: z.record(z.string(), z.string()).default({}),
  config: z.record(z.string(), z.unknown()).default({}),
  /** A command instead of the image's (e.g. `node <V8 flag> openclaw.mjs gateway run …` for a
   * V8 flag that NODE_OPTIONS refuses). */
  cmd: z.array(z.string()).optional(),
});
type Variant = z.infer<typeof Variant>;

const variants: Variant[] = process.env.BENCH_GATEWAY_VARIANTS
  ? z.array(Variant).parse(JSON.parse(await readFile(process.env.BENCH_GATEWAY_VARIANTS, "utf8")))
  : [{ name: "as the worker runs it", env: {}, config: {} }];
const idleSeconds = (process.env.BENCH_GATEWAY_IDLE_SECONDS ?? "60,120")
  .split(",")
  .map(Number)
  .filter((n) => Number.isFinite(n) && n > 0)
  .sort((a, b) => a - b);

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const { setRuntime } = await import("../worker/runtime/index.ts");
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rt = new DockerRuntime({ maxCpus: 1 });
const skip = await rt
  .ping()
  .then(async () => ((await rt.imageId(image)) ? undefined : `image ${image} is not built`))
  .catch((error: Error) => `no Docker engine (${error.message})`);

/** Deep merge of plain objects (arrays and scalars of `patch` replace). */
function merge(base: Record<string, unknown>, patch: Record<string, unknown>) {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    const b = out[k];
    const isObj = (x: unknown): x is Record<string, unknown> =>
      typeof x === "object" && x !== null && !Array.isArray(x);
    out[k] = isObj(b) && isObj(v) ? merge(b, v) : v;
  }
  return out;
}

if (skip) {
  console.warn(`\ngateway memory benchmark skipped: ${skip}`);
} else {
  setRuntime(rt);
  const { DEPLOYMENT_LABEL, GATEWAY_PORT } = await import("../worker/instances/engine.ts");
  const { gatewayHealthy } = await import("../app/server/openclaw/health.server.ts");
  const { env } = await import("../app/server/platform/env.server.ts");
  const labels = { [DEPLOYMENT_LABEL]: run };

  const sample = (id: string, at: string) => sampleMemory(rt, id, at);

  const results: Array<{
    variant: Variant;
    healthyMs: number;
    samples: MemorySample[];
    error?: string;
  }> = [];
  try {
    for (const [i, variant] of variants.entries()) {
      // One variant that does not start (say, a refused flag) is reported, the others still run.
      await measureVariant(i, variant).catch((error: Error) => {
        results.push({ variant, healthyMs: 0, samples: [], error: error.message });
        console.warn(`${variant.name}: ${error.message}`);
      });
    }
  } finally {
    await removeRunObjects(rt, DEPLOYMENT_LABEL, run, env().RUNTIME_NETWORK);
    await rm(dataDir, { recursive: true, force: true });
  }

  async function measureVariant(i: number, variant: Variant) {
    const t0 = Date.now();
    const id = await createBenchGateway(rt, {
      run,
      name: `agent-${run}-${i}`,
      image,
      labels,
      cmd: variant.cmd,
      env: variant.env,
      configure: (config) => merge(config, variant.config),
    });
    await rt.start(id);
    try {
      let address: string | undefined;
      for (;;) {
        const info = await rt.inspect(id);
        if (!info?.running) throw new Error(`${variant.name}: the gateway stopped while starting`);
        address = info.address;
        if (address && (await gatewayHealthy(`${address}:${GATEWAY_PORT}`, 2_000))) break;
        if (Date.now() - t0 > 300_000) throw new Error(`${variant.name}: not healthy in 300 s`);
        await new Promise((r) => setTimeout(r, 200));
      }
      const healthyMs = Date.now() - t0;
      const samples = [await sample(id, "healthy")];
      for (const s of idleSeconds) {
        const wait = healthyMs + s * 1000 - (Date.now() - t0);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        samples.push(await sample(id, `+${s} s`));
      }
      results.push({ variant, healthyMs, samples });
      // The sleeper's profile and the GC-before-freeze lever (decision 0222).
      const freeze = process.env.BENCH_GATEWAY_FREEZE;
      if (freeze === "1" || freeze === "gc") {
        const { freezeLever } = await import("./freeze-lever.ts");
        for (const line of await freezeLever(rt, id, freeze === "gc" ? "gc" : "none")) {
          console.warn(line);
        }
      }
      console.warn(
        `${variant.name}: healthy in ${(healthyMs / 1000).toFixed(1)} s; ${samples
          .map(
            (x) =>
              `${x.at} ${mib(x.stats)} (cgroup ${mib(x.usage)}, cache ${mib(x.cache)}, gateway RSS ${mib(x.gatewayRss)}, all RSS ${mib(x.allRss)})`,
          )
          .join("; ")} MiB`,
      );
    } finally {
      await rt.stop(id, 10);
      await rt.remove(id);
      await rt.removeVolume(`agent-${run}-${i}-state`);
    }
  }

  const pad = (s: string, n: number) => s.padEnd(n);
  console.warn(
    `\nidle gateway memory, one gateway at a time (${image}, plan solo limits; target ≤ ${TARGET_MIB} MiB, stretch ≤ ${STRETCH_MIB} MiB, on the docker stats figure)\n`,
  );
  console.warn(
    `${pad("variant", 34)} ${pad("at", 8)} ${pad("stats", 6)} ${pad("cgroup", 7)} ${pad("cache", 6)} ${pad("gw RSS", 7)} ${pad("all RSS", 8)} ${pad("procs", 6)} ${pad("target", 7)} met`,
  );
  for (const r of results) {
    if (r.error) console.warn(`${pad(r.variant.name.slice(0, 34), 34)} failed: ${r.error}`);
    for (const s of r.samples) {
      console.warn(
        `${pad(s === r.samples[0] ? r.variant.name.slice(0, 34) : "", 34)} ${pad(s.at, 8)} ${pad(mib(s.stats), 6)} ${pad(mib(s.usage), 7)} ${pad(mib(s.cache), 6)} ${pad(mib(s.gatewayRss), 7)} ${pad(mib(s.allRss), 8)} ${pad(String(s.processes), 6)} ${pad(`≤ ${TARGET_MIB}`, 7)} ${s.stats <= TARGET_MIB * 1024 ** 2 ? (s.stats <= STRETCH_MIB * 1024 ** 2 ? "yes (stretch)" : "yes") : "no"}`,
      );
    }
  }
  console.warn(
    "MiB. stats: cgroup usage less inactive page cache (docker stats); cgroup: raw usage incl. page cache; cache: page cache charged; gw RSS: the gateway's node process; all RSS: every process (shared pages counted in each)",
  );
}
