import { readFile } from "node:fs/promises";
import type { DockerRuntime } from "../worker/runtime/docker.ts";
import { MiB, procMeminfo } from "./density-host.ts";
import { printRows } from "./density-report.ts";

// What the density bench checks of the host before it starts (issue 53): a run whose host cannot
// hold its sleepers frozen measures something else (sleepers that fell back to a stop wake in
// ~30 s), and learns it only after hours of provisioning. Each limit is printed beside what the
// run needs; a hard one that misses ends the bench at once with what to change, unless
// DENSITY_IGNORE_LIMITS=1 (then the run goes on and the rows say what it met).
// The per-gateway figures are measured ones (decisions 0154, 0178, 0232); DENSITY_SLEEPER_SWAP_MIB
// and DENSITY_AWAKE_MIB replace them.

export interface DensityPlan {
  agents: number;
  awake: number;
  pool: number;
}

/** An awake idle gateway (decision 0154: 546-613 MiB; the goal's bound). */
const AWAKE_MIB = Number(process.env.DENSITY_AWAKE_MIB ?? 600);
/** What a frozen sleeper has in swap, uncompressed (0232: awake resident less the 32 MiB kept). */
const SLEEPER_SWAP_MIB = Number(process.env.DENSITY_SLEEPER_SWAP_MIB ?? 560);
/** What a frozen sleeper keeps resident (the freeze's floor). */
const SLEEPER_RESIDENT_MIB = 32;
/** zswap's pool per byte it holds (0183: about 40 % with lzo/lz4 on a gateway's pages). */
const POOL_RATIO = 0.4;
/** The web, the worker, the embedded database, the stand-in model. */
const PLATFORM_MIB = 1536;

const param = (p: string) =>
  readFile(`/sys/module/zswap/parameters/${p}`, "utf8").then(
    (s) => s.trim(),
    () => "",
  );

/** Prints the host's limits beside the run's needs; returns the hard ones that miss. */
export async function densityPreflight(rt: DockerRuntime, plan: DensityPlan): Promise<string[]> {
  const host = await procMeminfo.read();
  const info = (await rt.docker.info()) as { CgroupVersion?: string; SwapLimit?: boolean };
  const awake = Math.min(plan.awake, plan.agents);
  const sleepers = plan.agents - awake;
  const swapFree = host.swapFreeBytes / MiB;
  const swapNeed = sleepers * SLEEPER_SWAP_MIB;
  const zswapOn = (await param("enabled")).startsWith("Y");
  const poolCap = (host.totalBytes / MiB) * (Number((await param("max_pool_percent")) || 0) / 100);
  const poolNeed = zswapOn ? Math.min(poolCap, swapNeed * POOL_RATIO) : 0;
  const compressedSleepers = zswapOn
    ? Math.min(sleepers, Math.floor(poolCap / (SLEEPER_SWAP_MIB * POOL_RATIO)))
    : 0;
  const ramNeed =
    (awake + plan.pool) * AWAKE_MIB + sleepers * SLEEPER_RESIDENT_MIB + poolNeed + PLATFORM_MIB;
  const ramFree = host.availableBytes / MiB;
  const limits = (await readFile("/proc/self/limits", "utf8").catch(() => "")).match(
    /^Max open files\s+(\S+)\s+(\S+)/m,
  );
  const freezes = info.CgroupVersion !== "2" && info.SwapLimit !== false;

  const misses: string[] = [];
  if (!freezes) {
    misses.push(
      `sleepers cannot be frozen on this engine (cgroup ${info.CgroupVersion ?? "?"}, swap accounting ${info.SwapLimit ? "on" : "off"}): every sleeper would be stopped and wake by a boot (decision 0178)`,
    );
  }
  if (swapFree < swapNeed) {
    misses.push(
      `swap: ${sleepers} frozen sleepers need ~${(swapNeed / 1024).toFixed(1)} GiB of swap, ${(swapFree / 1024).toFixed(1)} GiB is free: the rest would be stopped, not frozen (their freeze is refused). Add a swap file of the difference (fallocate, mkswap, swapon; deploy/host-swap.sh SIZE on a host without swap), zswap in front`,
    );
  }
  if (ramFree < ramNeed) {
    misses.push(
      `RAM: ${awake} awake + ${plan.pool} pooled gateways, ${sleepers} sleepers' resident pages and the compressed pool need ~${(ramNeed / 1024).toFixed(1)} GiB, ${(ramFree / 1024).toFixed(1)} GiB is available`,
    );
  }
  const fmt = (mib: number) => `${(mib / 1024).toFixed(1)} GiB`;
  printRows(`Host limits for ${plan.agents} agents, ${awake} awake, ${plan.pool} pooled`, [
    ["freeze (cgroup v1 with swap accounting)", freezes ? "yes" : "NO"],
    [
      "swap free / the sleepers need",
      `${fmt(swapFree)} / ~${fmt(swapNeed)} (${SLEEPER_SWAP_MIB} MiB each)`,
    ],
    [
      "compressed pool cap / sleepers it holds",
      zswapOn
        ? `${fmt(poolCap)} / ~${compressedSleepers} of ${sleepers} (the rest on the disk swap: slower wakes)`
        : "zswap off: every sleeper on the disk swap (wakes 4–5 s, decision 0183)",
    ],
    ["RAM available / the run needs", `${fmt(ramFree)} / ~${fmt(ramNeed)}`],
    [
      "open files (soft / hard; Node raises its soft limit)",
      limits ? `${limits[1]} / ${limits[2]}` : "?",
    ],
  ]);
  return misses;
}
