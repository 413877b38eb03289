import { z } from "zod";
import type { DockerRuntime } from "../worker/runtime/docker.ts";

// What one gateway container holds, as the memory benches report it: the cgroup's figures
// (what `docker stats` shows: usage less the reclaimable inactive page cache; and the raw usage,
// which also counts the page cache of the image files the gateway read) and the resident memory
// of the processes inside.

export interface MemorySample {
  at: string;
  /** `docker stats`: cgroup usage less inactive page cache. */
  stats: number;
  /** cgroup usage as counted against the limit (includes the page cache). */
  usage: number;
  /** page cache charged to the cgroup (v1 `cache`, v2 `file`). */
  cache: number;
  /** resident memory of the gateway's node process. */
  gatewayRss: number;
  /** resident memory of every process in the container (shared pages counted in each). */
  allRss: number;
  processes: number;
}

const MemStats = z.object({
  usage: z.number().default(0),
  stats: z.record(z.string(), z.number()).default({}),
});

export async function sampleMemory(
  rt: DockerRuntime,
  id: string,
  at: string,
): Promise<MemorySample> {
  const s = await rt.docker.getContainer(id).stats({ stream: false });
  const mem = MemStats.parse(s.memory_stats);
  const inactive = mem.stats.inactive_file ?? mem.stats.total_inactive_file ?? 0;
  const cache = mem.stats.cache ?? mem.stats.file ?? 0;
  // Name and VmRSS of every process (busybox sh, no procps needed).
  const { stdout: status } = await rt.exec(id, [
    "sh",
    "-c",
    "for f in /proc/[0-9]*/status; do grep -E '^(Name|VmRSS):' $f 2>/dev/null | tr '\\n' ' '; echo; done",
  ]);
  let gatewayRss = 0;
  let allRss = 0;
  let processes = 0;
  for (const line of status.split("\n")) {
    const m = /Name:\s+(\S+).*VmRSS:\s+(\d+) kB/.exec(line);
    if (!m) continue;
    const rss = Number(m[2]) * 1024;
    processes += 1;
    allRss += rss;
    // The gateway: the largest node process (its workers are smaller).
    if (m[1]?.startsWith("node") || m[1]?.startsWith("openclaw")) {
      gatewayRss = Math.max(gatewayRss, rss);
    }
  }
  return {
    at,
    stats: Math.max(0, mem.usage - inactive),
    usage: mem.usage,
    cache,
    gatewayRss,
    allRss,
    processes,
  };
}

const CpuStats = z.object({ cpu_usage: z.object({ total_usage: z.number() }) });

/** CPU time the container has used so far, in ms (the cgroup's counter). */
export async function containerCpuMs(rt: DockerRuntime, id: string): Promise<number> {
  const s = await rt.docker.getContainer(id).stats({ stream: false });
  return CpuStats.parse(s.cpu_stats).cpu_usage.total_usage / 1e6;
}

export function mib(n: number) {
  return (n / 1024 ** 2).toFixed(0);
}
