import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, statfsSync } from "node:fs";
import path from "node:path";

// What a multi-node test swarm leaves behind when its run dies: dockerd processes (found by the
// pid files under the node folders, and only when their command line names that data root), the
// network namespaces named with this checkout's prefix, and node folders on tmpfs. Node
// built-ins only: `.ci/run` runs this file directly (`node test/runtime/swarm-leftovers.ts`)
// before the tests.

/** Per checkout, so two checkouts on one machine never touch each other's swarm. */
export const SWARM_PREFIX = `aps${createHash("sha256").update(process.cwd()).digest("hex").slice(0, 4)}`;
/**
 * Node data roots. On tmpfs where the machine has one with room for the images and what the
 * nodes write (4 GiB free): images are seeded into them in seconds (seed-images.ts; the same on
 * ext4 here cost ~43 s of CPU) and they are removed with the cluster, so nothing holds memory
 * after a run. Else on disk, kept between runs so images are loaded once.
 */
export const SWARM_NODES_ON_TMPFS = (() => {
  try {
    const fs = statfsSync("/dev/shm");
    return fs.bavail * fs.bsize >= 4 * 1024 ** 3;
  } catch {
    return false;
  }
})();
export const SWARM_NODES_DIR = SWARM_NODES_ON_TMPFS
  ? `/dev/shm/${SWARM_PREFIX}-swarm-nodes`
  : path.resolve(".data", "swarm-nodes");
/** Sockets and exec roots: short paths (a unix socket path must stay under 108 bytes). */
export const SWARM_RUN_DIR = `/tmp/${SWARM_PREFIX}`;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function stopPid(pid: number, dataRoot: string): Promise<void> {
  let cmdline = "";
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return; // gone
  }
  if (!cmdline.includes("dockerd") || !cmdline.includes(dataRoot)) return; // not ours
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + 20_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) process.kill(pid, "SIGKILL");
}

export function ourNamespaces(): string[] {
  let out = "";
  try {
    out = execFileSync("ip", ["netns", "list"], { encoding: "utf8" });
  } catch {
    return [];
  }
  return out
    .split("\n")
    .map((l) => l.split(" ")[0] ?? "")
    .filter((n) => n.startsWith(`${SWARM_PREFIX}-`));
}

export async function cleanSwarmLeftovers(): Promise<{ stopped: number; namespaces: number }> {
  let stopped = 0;
  if (existsSync(SWARM_NODES_DIR)) {
    for (const node of readdirSync(SWARM_NODES_DIR)) {
      const pidfile = path.join(SWARM_NODES_DIR, node, "dockerd.pid");
      if (!existsSync(pidfile)) continue;
      const pid = Number(readFileSync(pidfile, "utf8").trim());
      if (Number.isInteger(pid) && pid > 1 && alive(pid)) {
        await stopPid(pid, path.join(SWARM_NODES_DIR, node, "data"));
        stopped++;
      }
      rmSync(pidfile, { force: true });
    }
  }
  const namespaces = ourNamespaces();
  for (const ns of namespaces) {
    try {
      execFileSync("ip", ["netns", "del", ns]);
    } catch {
      // already gone
    }
  }
  rmSync(SWARM_RUN_DIR, { recursive: true, force: true });
  if (SWARM_NODES_ON_TMPFS) rmSync(SWARM_NODES_DIR, { recursive: true, force: true });
  return { stopped, namespaces: namespaces.length };
}

if (import.meta.main) {
  const { stopped, namespaces } = await cleanSwarmLeftovers();
  process.stdout.write(
    `test swarm leftovers: ${stopped} dockerd stopped, ${namespaces} namespaces removed\n`,
  );
}
