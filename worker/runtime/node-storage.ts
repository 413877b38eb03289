import type { DockerRuntime } from "./docker.ts";
import { statusOf } from "./docker-engine.ts";
import type { Run } from "./storage-quota.ts";
import { LABELS } from "./types.ts";

// Storage commands on a Swarm node's own host (decision 0228). The worker runs on one host; a
// node's storage root (the btrfs deploy/host-storage.sh prepared there) is on another. Each
// node's engine keeps one helper container, the storage agent: the host's root bind-mounted at
// /host, the command run with `chroot /host` so the host's own btrfs-progs and coreutils act
// on the host's paths. Capabilities: SYS_ADMIN (btrfs ioctls), SYS_CHROOT, and CHOWN, FOWNER,
// DAC_OVERRIDE for the folders it makes for the gateway's user; no network.

export const STORAGE_AGENT = "agent-platform-storage-agent";
const AGENT_ROLE = "storage-agent";
/**
 * The command through the host's own shell: a busybox `chroot` runs its built-in applet of the
 * same name (stat, mkdir) instead of the host's program (seen: `stat -f` said UNKNOWN).
 */
const HOST_EXEC = ["/bin/sh", "-c", 'exec "$0" "$@"'];

/** The node's storage agent, running (made or started when needed); its container id. */
async function ensureAgent(engine: DockerRuntime, image: string): Promise<string> {
  const found = await engine.inspect(STORAGE_AGENT);
  if (found?.running && found.image === image) return found.id;
  if (found) await engine.remove(found.id); // stopped, or another image: made again
  try {
    const created = await engine.docker.createContainer({
      name: STORAGE_AGENT,
      Image: image,
      Entrypoint: ["sleep", "2147483647"],
      Cmd: [],
      User: "0",
      Labels: { [LABELS.role]: AGENT_ROLE },
      HostConfig: {
        Init: true,
        NetworkMode: "none",
        CapDrop: ["ALL"],
        CapAdd: ["SYS_ADMIN", "SYS_CHROOT", "CHOWN", "FOWNER", "DAC_OVERRIDE"],
        Binds: ["/:/host"],
        RestartPolicy: { Name: "unless-stopped" },
      },
    });
    await created.start();
    return created.id;
  } catch (error) {
    if (statusOf(error) !== 409) throw error;
    // Another caller made it meanwhile.
    const made = await engine.inspect(STORAGE_AGENT);
    if (!made) throw error;
    if (!made.running) await engine.start(made.id);
    return made.id;
  }
}

/** A Run on the engine's host, through its storage agent on `image` (one with sleep, chroot). */
export function nodeRunner(engine: DockerRuntime, image: string): Run {
  let agent: Promise<string> | undefined;
  return async (file, args) => {
    agent ??= ensureAgent(engine, image).catch((error: unknown) => {
      agent = undefined;
      throw error;
    });
    const id = await agent;
    let out: Awaited<ReturnType<DockerRuntime["exec"]>>;
    try {
      out = await engine.exec(id, ["chroot", "/host", ...HOST_EXEC, file, ...args], {
        timeoutMs: 60_000,
      });
    } catch (error) {
      agent = undefined; // gone or stopped: made or started again next time
      throw error;
    }
    if (out.exitCode !== 0) {
      throw Object.assign(new Error(`${file} ${args.join(" ")}: ${out.stderr.trim()}`), {
        stderr: out.stderr,
      });
    }
    return out.stdout;
  };
}
