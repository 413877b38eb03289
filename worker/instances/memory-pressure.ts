import { env } from "../../app/server/platform/env.server.ts";
import { type HostMemory, type HostMemorySource, procMeminfo } from "./host-memory.ts";

// What a full host needs that one agent did not (decision 0222): the engine host's memory,
// read where decisions are made (the sleep pass, the warm pool's fill, a wake's turn). The
// worker runs on the engine's host with the Docker driver, as the pool's default size already
// assumes; tests hand in their own figures with setHostMemorySource.

let source: HostMemorySource = procMeminfo;

export function setHostMemorySource(next: HostMemorySource | undefined): void {
  source = next ?? procMeminfo;
}

export function readHostMemory(): Promise<HostMemory> {
  return source.read();
}

const MiB = 1024 ** 2;

/** What a gateway without a recorded sample is taken to need awake (0178's measured range). */
export const DEFAULT_NEED_BYTES = 1024 ** 3;

/** Memory is tight: MemAvailable under MEMORY_TIGHT_PERCENT of the RAM (0: never). */
export function isTight(m: HostMemory): boolean {
  const percent = env().MEMORY_TIGHT_PERCENT;
  return percent > 0 && m.totalBytes > 0 && m.availableBytes < (m.totalBytes * percent) / 100;
}

/**
 * Room for a gateway to come back: what is available now, plus what the kernel can still
 * push out of RAM without killing anything (the compressed pool, as far as the disk swap has
 * room for it), less the reserve kept for the web, the worker and the kernel.
 */
export function roomBytes(m: HostMemory): number {
  const pushable = Math.min(m.zswapPoolBytes, m.swapFreeBytes);
  return m.availableBytes + pushable - env().MEMORY_RESERVE_MIB * MiB;
}

/** Whether `needBytes` more fits on the host now (always, when MEMORY_TIGHT_PERCENT is 0). */
export async function fits(needBytes: number): Promise<boolean> {
  if (env().MEMORY_TIGHT_PERCENT === 0) return true;
  const m = await readHostMemory().catch(() => undefined);
  return m === undefined || roomBytes(m) >= needBytes;
}

/** Memory is tight on the host now (a host whose memory cannot be read is taken as not tight). */
export async function memoryIsTight(): Promise<boolean> {
  const m = await readHostMemory().catch(() => undefined);
  return m !== undefined && isTight(m);
}
