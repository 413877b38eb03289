import { readFile } from "node:fs/promises";
import { procMeminfo } from "../worker/instances/host-memory.ts";

// The host's figures the density bench prints (issue 53): memory, swap and how much of it sits
// in the compressed pool, zswap's settings, CPU time, and one container's cgroup (v1) memory.

export const MiB = 1024 ** 2;

export { procMeminfo };

/** zswap's state as one line: on/off, compressor, pool cap. */
export async function zswapState(): Promise<string> {
  const param = (p: string) =>
    readFile(`/sys/module/zswap/parameters/${p}`, "utf8").then(
      (s) => s.trim(),
      () => "?",
    );
  const enabled = await param("enabled");
  if (!enabled.startsWith("Y")) return "zswap off";
  return `zswap on (${await param("compressor")}, pool ≤ ${await param("max_pool_percent")} % of RAM)`;
}

/** The swap devices as "name size". */
export async function swapDevices(): Promise<string> {
  const lines = (await readFile("/proc/swaps", "utf8").catch(() => "")).trim().split("\n");
  return (
    lines
      .slice(1)
      .map((l) => {
        const [name, , size] = l.split(/\s+/);
        return `${name} ${Math.round(Number(size) / 1024)} MiB`;
      })
      .join(", ") || "none"
  );
}

/** Busy and total CPU time of the host so far (jiffies, /proc/stat's first line). */
export async function cpuTimes(): Promise<{ busy: number; total: number }> {
  const first = (await readFile("/proc/stat", "utf8")).split("\n")[0] ?? "";
  const n = first.trim().split(/\s+/).slice(1).map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  const idle = (n[3] ?? 0) + (n[4] ?? 0); // idle + iowait
  return { busy: total - idle, total };
}

/** Host CPU busy between two readings, in % of all cores. */
export const cpuPercent = (
  a: { busy: number; total: number },
  b: { busy: number; total: number },
) => (b.total > a.total ? (100 * (b.busy - a.busy)) / (b.total - a.total) : 0);

export interface CgroupMemory {
  /** Charged memory less the inactive page cache (what `docker stats` shows). */
  resident: number;
  /** What the container has in swap (memory+swap less memory). */
  swap: number;
}

/** A Docker container's memory from its cgroup v1 directory; undefined where there is none. */
export async function cgroupMemory(containerId: string): Promise<CgroupMemory | undefined> {
  const dir = `/sys/fs/cgroup/memory/docker/${containerId}`;
  try {
    const usage = Number(await readFile(`${dir}/memory.usage_in_bytes`, "utf8"));
    const memsw = Number(await readFile(`${dir}/memory.memsw.usage_in_bytes`, "utf8"));
    const stat = await readFile(`${dir}/memory.stat`, "utf8");
    const inactive = Number(/^total_inactive_file (\d+)/m.exec(stat)?.[1] ?? 0);
    return { resident: Math.max(0, usage - inactive), swap: Math.max(0, memsw - usage) };
  } catch {
    return undefined;
  }
}
