import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { GATEWAY_PORT } from "../../worker/instances/engine.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { waitFor } from "./docker-support.ts";

// A Docker engine of the test's own, so a test can stop and start it (the engine going down)
// without touching the machine's dockerd: its own socket, data root, exec root and pid file in
// a temp dir, a default bridge of its own, no iptables rules and containerd namespaces of its
// own, so nothing it creates can collide with the system engine's.

export const BUSYBOX = "/usr/bin/busybox";
/** A gateway stand-in built from the host's static busybox: `/healthz` on the gateway port. */
export const STANDIN_IMAGE = "agent-platform-test-busybox-healthz:1";

export interface DedicatedDockerd {
  host: string;
  dir: string;
  /** Starts it with its own flags plus `extra` (e.g. `--live-restore`). */
  start(extra?: string[]): Promise<void>;
  stop(): Promise<void>;
  destroy(): Promise<void>;
}

export async function dedicatedDockerd(name: string): Promise<DedicatedDockerd> {
  // Short: a unix socket path must stay under 108 bytes.
  const dir = await mkdtemp(`/tmp/dd-${name}-`);
  const socket = path.join(dir, "docker.sock");
  const host = `unix://${socket}`;
  let child: ChildProcess | undefined;
  const bridge = `ddbr-${name}`.slice(0, 15); // an interface name has at most 15 characters
  const args = [
    `--host=${host}`,
    `--data-root=${path.join(dir, "data")}`,
    `--exec-root=${path.join(dir, "exec")}`,
    `--pidfile=${path.join(dir, "docker.pid")}`,
    // Its own default bridge and no --default-address-pool: with `--bridge=none` at every start,
    // and with an address pool at a restart, dockerd deletes the interface named docker0, the
    // system engine's, and every later `docker build` on the machine failed with "could not
    // find bridge docker0" (2026-11-28: the CI's background image build). Its networks come
    // from Docker's default pools, which skip the ranges the host already routes.
    `--bridge=${bridge}`,
    "--iptables=false",
    "--ip6tables=false",
    `--containerd-namespace=dd-${name}`,
    `--containerd-plugins-namespace=dd-${name}-plugins`,
  ];
  const rt = new DockerRuntime({ socketPath: socket });

  async function start(extra: string[] = []) {
    if (!existsSync(`/sys/class/net/${bridge}`)) {
      execFileSync("ip", ["link", "add", "name", bridge, "type", "bridge"]);
      execFileSync("ip", ["addr", "add", "10.214.0.1/24", "dev", bridge]);
      execFileSync("ip", ["link", "set", bridge, "up"]);
    }
    child = spawn("dockerd", [...args, ...extra], { stdio: "ignore" });
    await waitFor(
      async () => {
        await rt.ping();
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 100, what: "the dedicated dockerd" },
    );
  }

  async function stop() {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once("exit", () => resolve());
      running.kill("SIGTERM");
    });
  }

  return {
    host,
    dir,
    start,
    stop,
    async destroy() {
      if (child) {
        const c = await rt.docker.listContainers({ all: true });
        for (const x of c) await rt.docker.getContainer(x.Id).remove({ force: true, v: true });
        // Its networks' bridges (br-<id>) live in the host's namespace and outlive the engine
        // and its data root: left here, one per run piled up until Docker found no free address
        // pool for the system engine's networks.
        for (const n of await rt.docker.listNetworks()) {
          if (!["bridge", "host", "none"].includes(n.Name))
            await rt.docker.getNetwork(n.Id).remove();
        }
      }
      await stop();
      if (existsSync(`/sys/class/net/${bridge}`)) execFileSync("ip", ["link", "del", bridge]);
      await rm(dir, { recursive: true, force: true }).catch(() => {});
    },
  };
}

/** Builds the busybox `/healthz` stand-in inside the dedicated engine (no pull, no network). */
export async function buildStandin(dockerd: DedicatedDockerd): Promise<string> {
  if (!existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: the stand-in needs it`);
  const ctx = path.join(dockerd.dir, "standin");
  await mkdir(ctx, { recursive: true });
  await copyFile(BUSYBOX, path.join(ctx, "busybox"));
  await writeFile(
    path.join(ctx, "Dockerfile"),
    [
      "FROM scratch",
      "COPY busybox /bin/busybox",
      'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
      "RUN mkdir -p /www /home/node/.openclaw && echo ok > /www/healthz",
      // Like the gateway, it ends with code 0 on SIGTERM (the engine's own shutdown sends it),
      // so the engine's restart policy (on-failure) does not bring it back by itself.
      `CMD ["sh", "-c", "trap 'exit 0' TERM; httpd -p ${GATEWAY_PORT} -h /www; while :; do sleep 1; done"]`,
    ].join("\n"),
  );
  execFileSync("docker", ["build", "-q", "-t", STANDIN_IMAGE, ctx], {
    env: { ...process.env, DOCKER_HOST: dockerd.host, DOCKER_BUILDKIT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return STANDIN_IMAGE;
}
