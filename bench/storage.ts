import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { DockerRuntime } from "../worker/runtime/docker.ts";
import { StorageQuota } from "../worker/runtime/storage-quota.ts";

// `npm run bench` (BENCH_STORAGE=0 skips it; BENCH_ONLY=storage runs it alone): the write
// throughput of a gateway's state volume with and without its hard limit (decision 0216, goal
// >= 0.9x). Both volumes as the worker makes them, one on the engine's default volume storage,
// one a limited btrfs subvolume on the storage root (STORAGE_ROOT, else one prepared with
// deploy/host-storage.sh under /var/tmp); a one-shot container on the gateway image writes into
// each in turn (streaming 512 MiB with fsync, and 200 synchronous 4 KiB writes, SQLite's
// pattern), BENCH_STORAGE_ROUNDS rounds (default 3), the median kept. Needs root and btrfs-progs.

const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rounds = Number(process.env.BENCH_STORAGE_ROUNDS ?? 3);
const run = `bench-${randomBytes(3).toString("hex")}`;
const labels = { "agent-platform.deployment": run };

function storageRoot(): string | undefined {
  if (process.env.STORAGE_ROOT) return process.env.STORAGE_ROOT;
  const root = "/var/tmp/agent-platform-bench-storage";
  try {
    execFileSync("deploy/host-storage.sh", ["4G", `${root}.img`, root], { stdio: "pipe" });
    return root;
  } catch (error) {
    console.warn(
      `storage bench skipped: ${String((error as { stderr?: Buffer }).stderr ?? error)}`,
    );
    return undefined;
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const pad = (s: string, n: number) => s.padEnd(n);

/** Seconds of one write pattern into the volume (dd's own figure). */
async function timed(rt: DockerRuntime, volume: string, script: string): Promise<number> {
  const out = await rt.runOnce({
    image,
    volume,
    volumeTarget: "/data",
    entrypoint: ["sh", "-c"],
    // busybox dd prints no timing: busybox time does (seconds, 2 decimals).
    cmd: [`/bin/busybox time -f "elapsed %e" sh -c '${script}' 2>&1; rm -f /data/bench`],
    // As root with DAC_OVERRIDE: a limited volume's state folder is the gateway user's, 0700
    // (decision 0224), a plain one's root-owned; without it the write was refused.
    user: "0",
    capAdd: ["DAC_OVERRIDE"],
    labels,
  });
  const m = /elapsed ([\d.]+)/.exec(out.stdout + out.stderr);
  if (out.exitCode !== 0 || !m?.[1]) throw new Error(`write failed: ${out.stdout}${out.stderr}`);
  return Number(m[1]);
}

const root = storageRoot();
const probed = root ? await StorageQuota.probe(root) : undefined;
if (probed && "reason" in probed) console.warn(`storage bench skipped: ${probed.reason}`);
if (probed && "quota" in probed) {
  const rt = new DockerRuntime({
    storage: { quota: probed.quota, defaultLimitBytes: 2 * 1024 ** 3 },
  });
  const plain = new DockerRuntime();
  const limited = `${run}-limited`;
  const unlimited = `${run}-plain`;
  try {
    await rt.ensureVolume(limited, labels);
    await plain.ensureVolume(unlimited, labels);
    const patterns = {
      "stream 512 MiB": "dd if=/dev/zero of=/data/bench bs=1M count=512 conv=fsync",
      // busybox dd has no oflag=dsync: one fsync'd 4 KiB write per dd.
      "sync 4 KiB x200":
        "for i in $(seq 200); do dd if=/dev/zero of=/data/bench bs=4k count=1 seek=$i conv=fsync,notrunc 2>/dev/null; done",
    };
    console.warn(
      `\nState volume writes with and without the hard limit (median of ${rounds}; goal >= 0.90x)\n`,
    );
    console.warn(`${pad("pattern", 18)} ${pad("plain s", 9)} ${pad("limited s", 10)} ratio`);
    for (const [name, script] of Object.entries(patterns)) {
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < rounds; i++) {
        a.push(await timed(plain, unlimited, script));
        b.push(await timed(rt, limited, script));
      }
      const [pa, pb] = [median(a), median(b)];
      // Throughput ratio (limited / plain): plain time over limited time.
      console.warn(
        `${pad(name, 18)} ${pad(pa.toFixed(2), 9)} ${pad(pb.toFixed(2), 10)} ${(pa / pb).toFixed(2)}x`,
      );
    }
  } finally {
    await rt.removeVolume(limited).catch(() => {});
    await plain.removeVolume(unlimited).catch(() => {});
  }
}
