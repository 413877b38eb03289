import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, existsSync, openSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract as tarExtract, pack as tarPack } from "tar-fs";
import { linkPluginRoot } from "./openclaw-install.ts";
import {
  type AgentRuntime,
  type ContainerInfo,
  type ContainerSpec,
  type ContainerStats,
  type ContainerSummary,
  type ExecResult,
  LABELS,
} from "./types.ts";

// The process driver: the same pinned OpenClaw gateway run as a child process of the worker's
// machine, for laptops without a Docker engine (`npm start` picks it when no engine answers;
// docs/decisions/0037-process-driver.md). A "container" is a spec file plus a detached process
// (it outlives the worker, like a container), a "volume" is a folder, the "image" is an OpenClaw
// install of the image tag's version. Each gateway listens on its own loopback port, gets only
// the spec's environment (never the worker's) and its own HOME, TMPDIR (so its log files are its
// own) and state folder. It is not a sandbox: memory and CPU limits are not enforced, which is
// why production refuses this driver unless RUNTIME_DRIVER=process says so.

const GATEWAY_PORT = 18789;
/** The environment variable that marks a process as the gateway of one container spec. */
const MARK = "AGENT_PLATFORM_CONTAINER";

interface ProcessSpec {
  id: string;
  name: string;
  image: string;
  instanceId: string;
  userId: string;
  hostname: string;
  volume: string;
  volumeTarget: string;
  env: Record<string, string>;
  cmd?: string[];
  labels: Record<string, string>;
  limits: ContainerSpec["limits"];
  restartPolicy: string;
  port: number;
  createdAt: string;
  pid?: number;
  startedAt?: string;
  finishedAt?: string;
  exitCode?: number;
}

/** importVolume's name for tar entries that are not under state/ (skipped). */
const OUTSIDE = ".not-state";

export interface ProcessRuntimeOptions {
  /** Where specs, logs and volumes live (default <DATA_DIR>/runtime). */
  root: string;
  /** Finds the OpenClaw package (folder with openclaw.mjs) for an image tag's version. */
  resolveOpenclaw: (version: string) => string | undefined;
  /** The OpenClaw version an image tag stands for (`agent-gateway:2026.9.6` → 2026.9.6). */
  versionOf: (image: string) => string;
}

const execFileP = (file: string, args: string[], options: Parameters<typeof execFile>[2]) =>
  new Promise<ExecResult>((resolve) => {
    execFile(file, args, { ...options, encoding: "utf8" }, (error, stdout, stderr) => {
      const code = error ? ((error as { code?: unknown }).code ?? 1) : 0;
      resolve({
        exitCode: typeof code === "number" ? code : 1,
        stdout: String(stdout),
        stderr: String(stderr),
      });
    });
  });

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Signals the process's group (the gateway and its workers), or the process when it has none. */
function signalGroup(pid: number, signal: NodeJS.Signals) {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // gone
    }
  }
}

/** Whether the process is stopped by SIGSTOP (pauseForCopy): state T in /proc. */
async function stoppedBySignal(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "latin1");
    return stat[stat.lastIndexOf(")") + 2] === "T";
  } catch {
    return false;
  }
}

async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export class ProcessRuntime implements AgentRuntime {
  readonly driver = "process" as const;
  readonly #options: ProcessRuntimeOptions;
  /** Children started by this process (to reap their exit codes). */
  readonly #children = new Map<string, ChildProcess>();

  constructor(options: ProcessRuntimeOptions) {
    this.#options = options;
  }

  #dir = (kind: "containers" | "volumes") => path.join(this.#options.root, kind);
  #specPath = (name: string) => path.join(this.#dir("containers"), `${name}.json`);
  #logPath = (name: string) => path.join(this.#dir("containers"), `${name}.log`);
  volumePath = (name: string) => path.join(this.#dir("volumes"), name);

  async #read(name: string): Promise<ProcessSpec | undefined> {
    try {
      return JSON.parse(await readFile(this.#specPath(name), "utf8")) as ProcessSpec;
    } catch {
      return undefined;
    }
  }

  async #write(spec: ProcessSpec): Promise<void> {
    const file = this.#specPath(spec.name);
    const tmp = `${file}.${process.pid}.${randomUUID()}.tmp`;
    await writeFile(tmp, JSON.stringify(spec, null, 2), { mode: 0o600 });
    await rename(tmp, file);
  }

  readonly #queues = new Map<string, Promise<unknown>>();

  /**
   * Runs `fn` after the spec's earlier updates, so two read-modify-writes of one spec never
   * interleave (a gateway's exit handler and stop() both record its exit; CI saw the two renames
   * of one temporary file race, and a late write could bring back a removed spec).
   */
  #serial<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const next = (this.#queues.get(name) ?? Promise.resolve()).then(fn, fn);
    const settled = next.catch(() => undefined);
    this.#queues.set(name, settled);
    void settled.then(() => {
      if (this.#queues.get(name) === settled) this.#queues.delete(name);
    });
    return next;
  }

  /** Whether the spec's process is running: its pid is alive and carries the spec's mark. */
  async #running(spec: ProcessSpec): Promise<boolean> {
    if (!alive(spec.pid)) return false;
    try {
      const environ = await readFile(`/proc/${spec.pid}/environ`, "latin1");
      return environ.split("\0").includes(`${MARK}=${spec.name}`);
    } catch {
      // No /proc (macOS): trust the pid.
      return process.platform !== "linux";
    }
  }

  #openclaw(image: string): string {
    const version = this.#options.versionOf(image);
    const dir = this.#options.resolveOpenclaw(version);
    if (!dir) {
      throw new Error(
        `OpenClaw ${version} is not installed for the process driver (npm run gateway:install)`,
      );
    }
    return dir;
  }

  /** The spec's environment with the volume's mount point mapped onto its folder. */
  #environment(spec: ProcessSpec): Record<string, string> {
    const state = this.volumePath(spec.volume);
    return {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: state,
      TMPDIR: path.join(state, "tmp"),
      OPENCLAW_STATE_DIR: state,
      OPENCLAW_CONFIG_PATH: path.join(state, "openclaw.json"),
      OPENCLAW_WORKSPACE_DIR: path.join(state, "workspace"),
      XDG_CACHE_HOME: path.join(state, "cache"),
      OPENCLAW_DISABLE_BONJOUR: "1",
      OPENCLAW_NO_RESPAWN: "1",
      OPENCLAW_NO_AUTO_UPDATE: "1",
      // The image's settings (gateway/build.sh; decision 0154).
      NODE_OPTIONS: "--max-old-space-size=512 --max-semi-space-size=4",
      MALLOC_ARENA_MAX: "2",
      ...spec.env,
      [MARK]: spec.name,
    };
  }

  async engineCpus(): Promise<number> {
    return os.availableParallelism(); // the gateways are this host's processes
  }

  async ping(): Promise<void> {
    await mkdir(this.#dir("containers"), { recursive: true, mode: 0o700 });
    await mkdir(this.#dir("volumes"), { recursive: true, mode: 0o700 });
  }

  async ensureNetwork(): Promise<{ gatewayIp: string | undefined }> {
    // Gateways listen on loopback and reach the platform there.
    return { gatewayIp: "127.0.0.1" };
  }

  async ensureVolume(name: string): Promise<void> {
    await mkdir(this.volumePath(name), { recursive: true, mode: 0o700 });
  }

  async removeVolume(name: string): Promise<void> {
    await rm(this.volumePath(name), { recursive: true, force: true });
  }

  async exportVolume(volume: string): Promise<NodeJS.ReadableStream> {
    const root = this.volumePath(volume);
    if (!existsSync(root)) throw new Error(`volume ${volume} does not exist`);
    // tar-fs's pack is a streamx stream; Readable.from gives callers a Node stream.
    return Readable.from(
      tarPack(root, {
        map: (header) => ({
          ...header,
          name: header.name === "." ? "state" : `state/${header.name}`,
        }),
      }),
    );
  }

  async importVolume(volume: string, _image: string, tar: NodeJS.ReadableStream): Promise<void> {
    const root = this.volumePath(volume);
    await mkdir(root, { recursive: true, mode: 0o700 });
    await pipeline(
      tar,
      tarExtract(root, {
        // tar-fs maps before it filters: entries outside state/ (not the volume's) are renamed
        // into a marker folder that `ignore` then skips.
        map: (header) => {
          const inside = /^state(\/|$)/.test(header.name);
          const name = header.name.replace(/^state\/?/, "") || ".";
          return { ...header, name: inside ? name : `${OUTSIDE}/${header.name}` };
        },
        ignore: (_name, header) => !header || header.name.startsWith(`${OUTSIDE}/`),
      }),
    );
  }

  async volumeExists(name: string): Promise<boolean> {
    return existsSync(this.volumePath(name));
  }

  async imageId(image: string): Promise<string | undefined> {
    const version = this.#options.versionOf(image);
    return this.#options.resolveOpenclaw(version) ? `openclaw@${version}` : undefined;
  }

  /**
   * None: the folder would name one installed version, and an update moves the gateway to
   * another without re-applying the platform's config. OpenClaw copies the UI into the state.
   */
  async controlUiRoot(): Promise<string | undefined> {
    return undefined;
  }

  async create(spec: ContainerSpec): Promise<string> {
    await this.ping();
    if (await this.#read(spec.name)) throw new Error(`container ${spec.name} already exists`);
    this.#openclaw(spec.image); // fail now, not at start, when OpenClaw is missing
    await this.#write({
      id: spec.name,
      name: spec.name,
      image: spec.image,
      instanceId: spec.instanceId,
      userId: spec.userId,
      hostname: spec.hostname,
      volume: spec.volume,
      volumeTarget: spec.volumeTarget,
      env: spec.env,
      cmd: spec.cmd,
      labels: {
        ...spec.labels,
        [LABELS.managed]: "1",
        [LABELS.instanceId]: spec.instanceId,
        [LABELS.userId]: spec.userId,
        [LABELS.role]: "gateway",
      },
      limits: spec.limits,
      restartPolicy: spec.restartPolicy ?? "on-failure",
      port: await freeLoopbackPort(),
      createdAt: new Date().toISOString(),
    });
    return spec.name;
  }

  async start(id: string): Promise<void> {
    const spec = await this.#read(id);
    if (!spec) throw new Error(`no such container: ${id}`);
    if (await this.#running(spec)) {
      // A pause whose release never came (its worker died) ends with a start, as in Docker.
      if (spec.pid && (await stoppedBySignal(spec.pid))) signalGroup(spec.pid, "SIGCONT");
      return;
    }
    const openclaw = this.#openclaw(spec.image);
    const env = this.#environment(spec);
    for (const dir of [env.TMPDIR, env.OPENCLAW_WORKSPACE_DIR, env.XDG_CACHE_HOME]) {
      await mkdir(dir as string, { recursive: true, mode: 0o700 });
    }
    // The channel plugins installed next to OpenClaw, as the image's entrypoint links them.
    await linkPluginRoot(env.OPENCLAW_STATE_DIR as string, openclaw);
    // The port may have been taken since create: pick a new one if so.
    if (!(await portFree(spec.port))) spec.port = await freeLoopbackPort();
    const log = openSync(this.#logPath(spec.name), "a", 0o600);
    const args = spec.cmd?.length
      ? spec.cmd
      : ["gateway", "run", "--bind", "loopback", "--port", String(spec.port)];
    const child = spawn(process.execPath, [path.join(openclaw, "openclaw.mjs"), ...args], {
      cwd: this.volumePath(spec.volume),
      env: env as NodeJS.ProcessEnv,
      detached: true, // its own process group, and it outlives the worker (like a container)
      stdio: ["ignore", log, log],
    });
    closeSync(log);
    child.unref();
    this.#children.set(spec.name, child);
    child.once("exit", (code, signal) => {
      this.#children.delete(spec.name);
      this.#serial(spec.name, async () => {
        const now = await this.#read(spec.name);
        if (!now || now.pid !== child.pid) return;
        now.exitCode = code ?? (signal ? 128 + (signalNumber(signal) ?? 15) : 1);
        now.finishedAt = new Date().toISOString();
        await this.#write(now);
      }).catch(() => {}); // the spec went with its container
    });
    spec.pid = child.pid;
    spec.startedAt = new Date().toISOString();
    spec.finishedAt = undefined;
    spec.exitCode = undefined;
    await this.#write(spec);
  }

  async stop(id: string, timeoutSeconds = 10): Promise<void> {
    const spec = await this.#read(id);
    if (!spec?.pid || !(await this.#running(spec))) return;
    const pid = spec.pid;
    const group = (signal: NodeJS.Signals) => signalGroup(pid, signal);
    group("SIGTERM");
    group("SIGCONT"); // a paused one takes its SIGTERM once it runs
    const deadline = Date.now() + timeoutSeconds * 1000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (alive(pid)) group("SIGKILL");
    while (alive(pid)) await new Promise((r) => setTimeout(r, 50));
    await this.#serial(id, async () => {
      const now = await this.#read(id);
      if (now && now.pid === pid) {
        now.finishedAt = new Date().toISOString();
        now.exitCode ??= 0;
        await this.#write(now);
      }
    });
  }

  async pauseForCopy(id: string): Promise<() => Promise<void>> {
    const spec = await this.#read(id);
    const pid = spec?.pid;
    if (!spec || !pid || !(await this.#running(spec)) || (await stoppedBySignal(pid))) {
      return async () => {};
    }
    signalGroup(pid, "SIGSTOP");
    // The signal takes effect when the kernel next schedules the process: wait for it (2 s at
    // most), so the copy starts from a stopped gateway.
    const deadline = Date.now() + 2_000;
    while (!(await stoppedBySignal(pid)) && alive(pid) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    return async () => signalGroup(pid, "SIGCONT");
  }

  async restart(id: string, timeoutSeconds = 10): Promise<void> {
    await this.stop(id, timeoutSeconds);
    await this.start(id);
  }

  async remove(id: string): Promise<void> {
    await this.stop(id, 5);
    await this.#serial(id, async () => {
      await rm(this.#specPath(id), { force: true });
      await rm(this.#logPath(id), { force: true });
    });
  }

  async inspect(id: string): Promise<ContainerInfo | undefined> {
    const spec = await this.#read(id);
    if (!spec) return undefined;
    const alive = await this.#running(spec);
    const paused = alive && spec.pid !== undefined && (await stoppedBySignal(spec.pid));
    const running = alive && !paused;
    const version = this.#options.versionOf(spec.image);
    return {
      id: spec.id,
      name: spec.name,
      image: spec.image,
      imageId: `openclaw@${version}`,
      state: paused ? "paused" : running ? "running" : spec.startedAt ? "exited" : "created",
      running,
      health: undefined,
      oomKilled: false,
      exitCode: alive ? 0 : (spec.exitCode ?? (spec.startedAt ? 137 : 0)),
      restartCount: 0,
      startedAt: spec.startedAt,
      finishedAt: alive ? undefined : spec.finishedAt,
      labels: spec.labels,
      address: "127.0.0.1",
      endpoint: `127.0.0.1:${spec.port}`,
      ports: {
        [`${GATEWAY_PORT}/tcp`]: [{ hostIp: "127.0.0.1", hostPort: String(spec.port) }],
      },
      hostname: spec.hostname,
      limits: {
        memoryBytes: spec.limits.memoryBytes,
        cpuShares: spec.limits.cpuShares,
        nanoCpus: 0,
        pidsLimit: 0,
      },
      security: { init: false, capDrop: [], securityOpt: [], readOnly: false },
      restartPolicy: spec.restartPolicy,
      env: Object.keys(spec.env).map((k) => `${k}=…`),
      mounts: [{ name: spec.volume, destination: spec.volumeTarget, type: "volume" }],
    };
  }

  async stats(id: string): Promise<ContainerStats> {
    const spec = await this.#read(id);
    const none = {
      cpuPercent: 0,
      memoryBytes: 0,
      memoryLimitBytes: spec?.limits.memoryBytes ?? 0,
      pids: 0,
      rxBytes: 0,
      txBytes: 0,
    };
    if (!spec?.pid || !(await this.#running(spec))) return none;
    // CPU: the group's ticks over a short window; memory: the group's resident set.
    const first = await groupUsage(spec.pid);
    await new Promise((r) => setTimeout(r, 250));
    const second = await groupUsage(spec.pid);
    const ticksPerSecond = 100;
    const cpuPercent = ((second.ticks - first.ticks) / ticksPerSecond / 0.25) * 100;
    return {
      ...none,
      cpuPercent: Math.max(0, Math.round(cpuPercent * 100) / 100),
      memoryBytes: second.rssBytes,
      pids: second.pids,
    };
  }

  async logs(id: string, options: { tail?: number } = {}): Promise<string> {
    let text: string;
    try {
      text = await readFile(this.#logPath(id), "utf8");
    } catch {
      return "";
    }
    if (!options.tail) return text;
    return text
      .split("\n")
      .slice(-options.tail - 1)
      .join("\n");
  }

  async exec(id: string, cmd: string[], options: { timeoutMs?: number } = {}): Promise<ExecResult> {
    const spec = await this.#read(id);
    if (!spec) throw new Error(`no such container: ${id}`);
    const openclaw = this.#openclaw(spec.image);
    // `node openclaw.mjs …` inside the image runs from its OpenClaw folder; the same here.
    const [program, ...args] = cmd;
    const file = program === "node" ? process.execPath : (program as string);
    const env: Record<string, string> = {
      ...this.#environment(spec),
      OPENCLAW_GATEWAY_PORT: String(spec.port),
    };
    return execFileP(file, args, {
      cwd: openclaw,
      env: env as NodeJS.ProcessEnv,
      timeout: options.timeoutMs ?? 60_000,
      maxBuffer: 8 * 1024 * 1024,
    });
  }

  async list(labels: Record<string, string>): Promise<ContainerSummary[]> {
    let files: string[];
    try {
      files = (await readdir(this.#dir("containers"))).filter((f) => f.endsWith(".json"));
    } catch {
      return [];
    }
    const out: ContainerSummary[] = [];
    for (const file of files) {
      const spec = await this.#read(file.slice(0, -".json".length));
      if (!spec) continue;
      if (!Object.entries(labels).every(([k, v]) => spec.labels[k] === v)) continue;
      out.push({
        id: spec.id,
        name: spec.name,
        state: (await this.#running(spec)) ? "running" : "exited",
        labels: spec.labels,
      });
    }
    return out;
  }

  /**
   * A one-shot "container": the shell command on this machine, with the mount points in its
   * arguments and environment mapped onto the volumes' folders.
   */
  /** A directory is removed whoever uses it: nothing holds a process-driver volume. */
  async volumeHolders(_volume: string): Promise<ContainerSummary[]> {
    return [];
  }

  async runOnce(spec: Parameters<AgentRuntime["runOnce"]>[0]): Promise<ExecResult> {
    const mounts: Array<[string, string]> = [
      [spec.volumeTarget, this.volumePath(spec.volume)],
      ...Object.entries(spec.extraVolumes ?? {}).map(
        ([volume, target]) => [target, this.volumePath(volume)] as [string, string],
      ),
    ];
    for (const [, dir] of mounts) await mkdir(dir, { recursive: true, mode: 0o700 });
    // Longest mount point first, so /state/x is not mapped as /state + /x.
    mounts.sort((a, b) => b[0].length - a[0].length);
    const map = (s: string) =>
      mounts.reduce((acc, [target, dir]) => acc.split(target).join(dir), s);
    // chown to the image's uid means nothing here: the files already belong to this user.
    const args = [...(spec.entrypoint ?? []), ...spec.cmd]
      .map(map)
      .map((s) => s.replace(/ && chown 1000:1000 [^&]+/g, ""));
    const [program, ...rest] = args;
    if (!program) throw new Error("runOnce needs a command");
    const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
    for (const [k, v] of Object.entries(spec.env ?? {})) env[k] = map(v);
    return execFileP(program, rest, {
      cwd: this.volumePath(spec.volume),
      env: env as NodeJS.ProcessEnv,
      timeout: spec.timeoutMs ?? 60_000,
      maxBuffer: 8 * 1024 * 1024,
    });
  }

  async volumeSizes(): Promise<Map<string, number>> {
    const sizes = new Map<string, number>();
    let names: string[];
    try {
      names = await readdir(this.#dir("volumes"));
    } catch {
      return sizes;
    }
    for (const name of names) sizes.set(name, await folderSize(this.volumePath(name)));
    return sizes;
  }
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

function signalNumber(signal: NodeJS.Signals): number | undefined {
  return ({ SIGKILL: 9, SIGTERM: 15, SIGINT: 2 } as Record<string, number>)[signal];
}

/** CPU ticks, resident bytes and process count of a process group (Linux /proc). */
async function groupUsage(
  pgid: number,
): Promise<{ ticks: number; rssBytes: number; pids: number }> {
  let ticks = 0;
  let rssPages = 0;
  let pids = 0;
  let entries: string[] = [];
  try {
    entries = (await readdir("/proc")).filter((e) => /^\d+$/.test(e));
  } catch {
    return { ticks, rssBytes: 0, pids };
  }
  for (const pid of entries) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, "utf8");
      // Fields after the command name (which may contain spaces) start at ") ".
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) !== pgid) continue; // field 5: process group
      ticks += Number(fields[11]) + Number(fields[12]); // utime + stime
      rssPages += Number(fields[21]); // rss
      pids++;
    } catch {
      // exited meanwhile
    }
  }
  return { ticks, rssBytes: rssPages * 4096, pids };
}

async function folderSize(dir: string): Promise<number> {
  let total = 0;
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += await folderSize(full);
    else if (entry.isFile()) total += (await stat(full).catch(() => ({ size: 0 }))).size;
  }
  return total;
}
