import type { DockerRuntime } from "../worker/runtime/docker.ts";
import { LABELS } from "../worker/runtime/index.ts";
import { cgroupMemory, procMeminfo } from "./density-host.ts";

// One sample of the density bench's gateways (issue 53): each frozen sleeper's RAM (what stays
// resident plus its share of the compressed pool: its swap times the pool's RAM per swapped
// byte on this host) and each awake gateway's RAM while it has no message in flight.

export interface GatewaySample {
  at: number;
  frozen: Array<{ name: string; resident: number; swap: number; ram: number }>;
  stopped: number;
  awakeAgents: number;
  pool: number;
  awakeIdle: Array<{ name: string; resident: number }>;
  /** Of the host's swap in use, the part held by the compressed pool (zswap), in %. */
  compressedPercent: number;
  sleeperMeanBytes: number;
  sleeperResidentMeanBytes: number;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN);

export async function sampleGateways(
  rt: DockerRuntime,
  labels: Record<string, string>,
  agentNames: Set<string>,
  busy: Set<string>,
): Promise<GatewaySample> {
  const host = await procMeminfo.read();
  const swapUsed = host.swapTotalBytes - host.swapFreeBytes;
  // RAM the pool takes per byte swapped out (host-wide: the kernel keeps no per-cgroup split).
  const poolPerSwapped = swapUsed > 0 ? host.zswapPoolBytes / swapUsed : 0;
  const sample: GatewaySample = {
    at: Date.now(),
    frozen: [],
    stopped: 0,
    awakeAgents: 0,
    pool: 0,
    awakeIdle: [],
    compressedPercent: swapUsed > 0 ? (100 * host.zswappedBytes) / swapUsed : 0,
    sleeperMeanBytes: Number.NaN,
    sleeperResidentMeanBytes: Number.NaN,
  };
  for (const c of await rt.list({ ...labels, [LABELS.role]: "gateway" })) {
    if (c.state === "exited" || c.state === "created") {
      if (agentNames.has(c.name)) sample.stopped += 1;
      continue;
    }
    const memory = await cgroupMemory(c.id);
    if (!memory) continue;
    if (c.state === "paused") {
      sample.frozen.push({
        name: c.name,
        resident: memory.resident,
        swap: memory.swap,
        ram: memory.resident + memory.swap * poolPerSwapped,
      });
      continue;
    }
    if (c.state !== "running") continue;
    if (agentNames.has(c.name)) sample.awakeAgents += 1;
    else sample.pool += 1;
    if (!busy.has(c.name)) sample.awakeIdle.push({ name: c.name, resident: memory.resident });
  }
  sample.sleeperMeanBytes = mean(sample.frozen.map((f) => f.ram));
  sample.sleeperResidentMeanBytes = mean(sample.frozen.map((f) => f.resident));
  return sample;
}
