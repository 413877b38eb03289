import { PassThrough } from "node:stream";
import type Docker from "dockerode";
import { call, demux } from "./docker-engine.ts";
import { type AgentRuntime, type ExecResult, LABELS } from "./types.ts";

// Commands run by the Docker driver: an exec in a running container, and a one-shot container
// on a volume (no network, capabilities dropped, removed at once).

/** The guard a gateway image runs its entrypoint under (gateway/fs-guard.c, decision 0244). */
const FS_GUARD = "/usr/local/bin/agent-gateway-fs-guard";

/**
 * `cmd` under the container's subvolume guard when its entrypoint has one: an exec'd process is
 * not the entrypoint's child, and a command that loads the agent's files (the OpenClaw CLI reads
 * plugins and config from the state) would otherwise run the tenant's code without the filter.
 */
async function guarded(container: Docker.Container, cmd: string[]): Promise<string[]> {
  const entrypoint = (await call(() => container.inspect())).Config?.Entrypoint;
  return Array.isArray(entrypoint) && entrypoint[0] === FS_GUARD ? [FS_GUARD, ...cmd] : cmd;
}

export async function execIn(
  docker: Docker,
  id: string,
  cmd: string[],
  options: { timeoutMs?: number } = {},
): Promise<ExecResult> {
  const container = docker.getContainer(id);
  const argv = await guarded(container, cmd);
  const exec = await call(() =>
    container.exec({ Cmd: argv, AttachStdout: true, AttachStderr: true, Tty: false }),
  );
  const stream = await call(() => exec.start({ hijack: true, stdin: false }));
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  stdout.on("data", (c: Buffer) => out.push(c));
  stderr.on("data", (c: Buffer) => err.push(c));
  docker.modem.demuxStream(stream, stdout, stderr);
  const timeoutMs = options.timeoutMs ?? 60_000;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      stream.destroy();
      reject(new Error(`exec timed out after ${timeoutMs} ms: ${cmd.join(" ")}`));
    }, timeoutMs);
    stream.on("end", () => {
      clearTimeout(timer);
      resolve();
    });
    stream.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
    stream.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
  const info = await call(() => exec.inspect());
  return {
    exitCode: info.ExitCode ?? -1,
    stdout: Buffer.concat(out).toString("utf8"),
    stderr: Buffer.concat(err).toString("utf8"),
  };
}

/**
 * The one-shot's exit as inspect sees it, polled: beside the engine's wait, whose answer was
 * seen never to come on a loaded engine (an update's rollback copy exited in 4 s and its wait
 * sat out the test's 240 s bound, twice in full CI runs).
 */
async function exitSeen(
  container: Docker.Container,
  done: () => boolean,
): Promise<{ StatusCode: number }> {
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_000).unref());
    if (done()) return new Promise<never>(() => {}); // the race is over: nothing to report
    const info = await container.inspect().catch(() => undefined);
    const state = info?.State;
    if (state && !state.Running && (state.Status === "exited" || state.Status === "dead")) {
      return { StatusCode: state.ExitCode };
    }
  }
}

export async function runOnce(
  docker: Docker,
  spec: Parameters<AgentRuntime["runOnce"]>[0],
): Promise<ExecResult> {
  const container = await call(() =>
    docker.createContainer({
      Image: spec.image,
      Entrypoint: spec.entrypoint,
      Cmd: spec.cmd,
      Env: Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
      Labels: { ...spec.labels, [LABELS.managed]: "1", [LABELS.role]: "one-shot" },
      User: spec.user,
      HostConfig: {
        CapDrop: ["ALL"],
        CapAdd: spec.capAdd,
        SecurityOpt: ["no-new-privileges"],
        NetworkMode: "none",
        Memory: 256 * 1024 ** 2,
        NanoCpus: 500_000_000,
        Mounts: [
          { Type: "volume", Source: spec.volume, Target: spec.volumeTarget },
          ...Object.entries(spec.extraVolumes ?? {}).map(([Source, Target]) => ({
            Type: "volume" as const,
            Source,
            Target,
          })),
        ],
      },
    }),
  );
  try {
    await call(() => container.start());
    const timeoutMs = spec.timeoutMs ?? 60_000;
    let settled = false;
    const result = (await Promise.race([
      call(() => container.wait(), Number.POSITIVE_INFINITY), // bounded by timeoutMs below
      exitSeen(container, () => settled),
      new Promise((_, reject) =>
        setTimeout(
          () => reject(new Error(`one-shot timed out after ${timeoutMs} ms`)),
          timeoutMs,
        ).unref(),
      ),
    ]).finally(() => {
      settled = true;
    })) as { StatusCode: number };
    const raw = (await call(() =>
      container.logs({ stdout: true, stderr: true, follow: false }),
    )) as unknown as Buffer;
    const { stdout, stderr } = demux(raw);
    return { exitCode: result.StatusCode, stdout, stderr };
  } finally {
    await container.remove({ force: true, v: true }).catch(() => {});
  }
}
