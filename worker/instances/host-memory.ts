import { readFile } from "node:fs/promises";

// The engine host's memory as the kernel reports it (/proc/meminfo), for the decisions a full
// host needs (decision 0222) and for the density bench. Read through the HostMemorySource
// interface, so tests hand in the figures they need instead of the machine's.

export interface HostMemory {
  totalBytes: number;
  /** What can be given to a new process without swapping (MemAvailable). */
  availableBytes: number;
  swapTotalBytes: number;
  swapFreeBytes: number;
  /** RAM the compressed pool (zswap) takes. */
  zswapPoolBytes: number;
  /** What the compressed pool holds, uncompressed (0 on kernels older than 5.19). */
  zswappedBytes: number;
}

export interface HostMemorySource {
  read(): Promise<HostMemory>;
}

const KIB = 1024;

/** Parses /proc/meminfo (values in kB); a field the kernel does not have reads as 0. */
export function parseMeminfo(text: string): HostMemory {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text);
    return m ? Number(m[1]) * KIB : 0;
  };
  return {
    totalBytes: field("MemTotal"),
    availableBytes: field("MemAvailable"),
    swapTotalBytes: field("SwapTotal"),
    swapFreeBytes: field("SwapFree"),
    zswapPoolBytes: field("Zswap"),
    zswappedBytes: field("Zswapped"),
  };
}

/** This machine's /proc/meminfo (the worker runs on the engine host with the Docker driver). */
export const procMeminfo: HostMemorySource = {
  read: async () => parseMeminfo(await readFile("/proc/meminfo", "utf8")),
};
