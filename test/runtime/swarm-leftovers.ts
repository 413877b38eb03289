import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statfsSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";

// What a multi-node test swarm leaves behind when its run dies: dockerd processes (found by the
// pid files under the node folders, and only when their command line names that data root), the
// network namespaces named with this checkout's prefix, mounts a dockerd left below the run
// folder (bind mounts of its overlay networks' namespaces, which make removing it fail with
// EBUSY), and node folders on tmpfs, whose pages hold memory, then swap, until removed. Node
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
/** A checkout's node folders on tmpfs, by its prefix. */
const tmpfsNodesDir = (prefix: string) => `/dev/shm/${prefix}-swarm-nodes`;
export const SWARM_NODES_DIR = SWARM_NODES_ON_TMPFS
  ? tmpfsNodesDir(SWARM_PREFIX)
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

/** Mount points at or below `dir`, deepest first (mountinfo escapes spaces and such as \\ooo). */
export function mountsBelow(dir: string, mountinfo = readFileSync("/proc/self/mountinfo", "utf8")) {
  const decode = (p: string) =>
    p.replace(/\\([0-7]{3})/g, (_, octal: string) =>
      String.fromCharCode(Number.parseInt(octal, 8)),
    );
  return mountinfo
    .split("\n")
    .map((line) => decode(line.split(" ")[4] ?? ""))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/** Removes a folder after detaching whatever is still mounted in it. */
export function removeTree(dir: string): void {
  for (const mount of mountsBelow(dir)) {
    try {
      execFileSync("umount", ["-l", mount], { stdio: "ignore" });
    } catch {
      // unmounted meanwhile
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

/** Which checkout a run folder belongs to, so another checkout can tell an orphan. */
const OWNER_FILE = "checkout";
export function claimRunDir(): void {
  mkdirSync(SWARM_RUN_DIR, { recursive: true });
  writeFileSync(path.join(SWARM_RUN_DIR, OWNER_FILE), process.cwd());
}

async function stopNodes(nodesDir: string): Promise<number> {
  let stopped = 0;
  if (!existsSync(nodesDir)) return 0;
  for (const node of readdirSync(nodesDir)) {
    const pidfile = path.join(nodesDir, node, "dockerd.pid");
    if (!existsSync(pidfile)) continue;
    const pid = Number(readFileSync(pidfile, "utf8").trim());
    if (Number.isInteger(pid) && pid > 1 && alive(pid)) {
      await stopPid(pid, path.join(nodesDir, node, "data"));
      stopped++;
    }
    rmSync(pidfile, { force: true });
  }
  return stopped;
}

/**
 * Run folders and tmpfs node folders of checkouts that no longer exist (a clean clone in a
 * temporary folder whose run died): nobody else would ever remove them.
 */
export async function cleanOrphans(): Promise<number> {
  let removed = 0;
  for (const name of readdirSync("/tmp")) {
    const prefix = /^(aps[0-9a-f]{4})$/.exec(name)?.[1];
    if (!prefix || prefix === SWARM_PREFIX) continue;
    let owner: string;
    try {
      owner = readFileSync(path.join("/tmp", name, OWNER_FILE), "utf8");
    } catch {
      continue; // not claimed: cannot tell whose it is
    }
    if (existsSync(owner)) continue;
    const nodesDir = tmpfsNodesDir(prefix);
    await stopNodes(nodesDir);
    // The run folder (with its owner file) last: a removal that fails leaves it to tell the
    // next run whose the rest was.
    removeTree(nodesDir);
    removeTree(path.join("/tmp", name));
    removed++;
  }
  return removed;
}

export async function cleanSwarmLeftovers(): Promise<{
  stopped: number;
  namespaces: number;
  orphans: number;
}> {
  const stopped = await stopNodes(SWARM_NODES_DIR);
  const namespaces = ourNamespaces();
  for (const ns of namespaces) {
    try {
      execFileSync("ip", ["netns", "del", ns]);
    } catch {
      // already gone
    }
  }
  if (SWARM_NODES_ON_TMPFS) removeTree(SWARM_NODES_DIR);
  removeTree(SWARM_RUN_DIR);
  const orphans = await cleanOrphans();
  return { stopped, namespaces: namespaces.length, orphans };
}

if (import.meta.main) {
  const { stopped, namespaces, orphans } = await cleanSwarmLeftovers();
  process.stdout.write(
    `test swarm leftovers: ${stopped} dockerd stopped, ${namespaces} namespaces removed, ${orphans} orphaned checkouts' folders removed\n`,
  );
}
