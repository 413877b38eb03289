import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { STATE_DIR } from "../../worker/instances/engine.ts";
import type { Recorder } from "./record.ts";
import { chatHttp } from "./turns.ts";
import type { SoakUser } from "./users.ts";

// Faults of one gateway's resources (issue 52): its memory limit hit for real mid-turn, and its
// state volume filled. Both stay inside the one container's limits: never a host-wide OOM, and
// the fill stops at a bound the soak sets (or at the volume's quota where STORAGE_ROOT is btrfs).

const run = promisify(execFile);
const MiB = 1024 ** 2;
/** The most the disk fault writes where no quota stops it (SOAK_FILL_MB, default 512). */
export const FILL_BOUND_MB = Number(process.env.SOAK_FILL_MB ?? 512);

async function memoryUsage(id: string): Promise<number> {
  // cgroup v1 (this machine) or v2, as the engine lays them out with the cgroupfs/systemd driver.
  for (const file of [
    `/sys/fs/cgroup/memory/docker/${id}/memory.usage_in_bytes`,
    `/sys/fs/cgroup/system.slice/docker-${id}.scope/memory.current`,
    `/sys/fs/cgroup/docker/${id}/memory.current`,
  ]) {
    const text = await readFile(file, "utf8").catch(() => undefined);
    if (text) return Number(text.trim());
  }
  throw new Error(`no memory cgroup found for ${id.slice(0, 12)}`);
}

async function inspect(id: string, format: string): Promise<string> {
  return (await run("docker", ["inspect", "--format", format, id])).stdout.trim();
}

/**
 * OOM-kills the gateway by its own memory limit: the gateway process is made the OOM killer's
 * first choice (oom_score_adj 1000, from the host), the container's limit is lowered live to just
 * above its use (`docker update`; the kernel refuses a limit below use), and a process in the
 * container allocates until the limit is hit. The limit is put back at once: the engine's or
 * reconcile's restart must not inherit the lowered one.
 */
export async function oomKill(id: string): Promise<string> {
  const full = await inspect(id, "{{.Id}}");
  const [memory = "0", swap = "0"] = (
    await inspect(full, "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}}")
  ).split(" ");
  const { stdout } = await run("docker", ["top", full, "-eo", "pid,rss,args"]);
  const gateway = stdout
    .split("\n")
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .map(([pid, rss, ...args]) => ({ pid: Number(pid), rss: Number(rss), args: args.join(" ") }))
    .filter((p) => p.pid > 0 && !p.args.includes("docker-init"))
    .sort((a, b) => b.rss - a.rss)[0];
  if (!gateway) return "no gateway process";
  await run("sh", ["-c", `echo 1000 > /proc/${gateway.pid}/oom_score_adj`]);
  // The engine's restart policy may have restarted it before the state is read: its restart
  // count tells a kill from a survival.
  const restartsBefore = await inspect(full, "{{.RestartCount}}");
  const lowered = (await memoryUsage(full)) + 32 * MiB;
  try {
    await run("docker", [
      "update",
      "--memory",
      String(lowered),
      "--memory-swap",
      String(lowered),
      full,
    ]);
    // Allocates 8 MB at a time until the kernel kills (the gateway first, then this process
    // goes with the container); bounded by the container's limit, never the host's memory.
    await run(
      "docker",
      ["exec", full, "node", "-e", "const b=[];for(;;)b.push(Buffer.alloc(8e6,1))"],
      { timeout: 60_000 },
    ).catch(() => {});
  } finally {
    // Back to the limit it was made with (raising works on a running or exited container).
    await run("docker", ["update", "--memory-swap", swap, "--memory", memory, full]).catch(
      (error: unknown) => {
        throw new Error(`restoring ${full.slice(0, 12)}'s memory limit failed: ${error}`);
      },
    );
  }
  const state = await inspect(
    full,
    "{{.State.Status}} exit {{.State.ExitCode}} oom {{.State.OOMKilled}} restarts {{.RestartCount}}",
  );
  return `limit ${Math.round(Number(memory) / MiB)} → ${Math.round(lowered / MiB)} MiB, gateway pid ${gateway.pid} (${Math.round(gateway.rss / 1024)} MiB); then ${state} (restarts before: ${restartsBefore}); limit restored`;
}

/**
 * Fills the agent's state volume (its workspace) up to FILL_BOUND_MB or until the volume's
 * quota refuses (EDQUOT/ENOSPC), then sends one chat: it must answer, or be refused with a
 * reason (never lost, never a 500). The fill is removed after, so the run's traffic goes on.
 */
export async function fillDisk(
  rec: Recorder,
  base: string,
  user: SoakUser,
  id: string,
): Promise<string> {
  const file = `${STATE_DIR}/workspace/soak-fill`;
  const dd = await run(
    "docker",
    [
      "exec",
      id,
      "sh",
      "-c",
      `dd if=/dev/zero of=${file} bs=1M count=${FILL_BOUND_MB} 2>&1; echo rc=$?; du -m ${file}`,
    ],
    { timeout: 120_000 },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? String(error) }));
  const written = /(\d+)\s+\S*soak-fill/.exec(dd.stdout)?.[1] ?? "?";
  const full = /No space left|Disk quota exceeded/.test(dd.stdout);
  const a = await chatHttp(rec, base, user, "30/20", "chat-full-disk");
  const answer =
    typeof a.outcome === "number" && a.outcome < 300
      ? `answered ${a.outcome}`
      : `refused ${a.outcome}: ${JSON.stringify(a.body.error ?? a.body).slice(0, 120)}`;
  await run("docker", ["exec", id, "rm", "-f", file]).catch(() => {});
  return `${written} MiB written (${full ? "the volume refused more" : `bound ${FILL_BOUND_MB} MiB reached`}); a chat ${answer}; fill removed`;
}
