import { execFileSync, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type Docker from "dockerode";
import { describe } from "vitest";
import { GATEWAY_PORT } from "../../worker/instances/engine.ts";
import { demux, engineClient } from "../../worker/runtime/docker-engine.ts";
import type { ExecResult } from "../../worker/runtime/types.ts";
import { dockerRequired, waitFor } from "./docker-support.ts";

// A Swarm of our own for the Swarm driver's tests: a dedicated dockerd in a network namespace
// the test makes (own socket, data root, exec root, pid file; no bridge, no iptables), so the
// system engine at /var/run/docker.sock, which other tests use, never joins a swarm. Inside the
// namespace the engine listens on its own loopback: traffic never leaves the namespace.

export interface SwarmEngine {
  name: string;
  dir: string;
  host: string;
  docker: Docker;
  nodeId: string;
  stop(): Promise<void>;
}

function missingTools(): string | undefined {
  if (process.getuid?.() !== 0) return "not root (a network namespace and a dockerd need root)";
  for (const tool of ["dockerd", "ip", "nsenter", "busybox"]) {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    } catch {
      return `${tool} is not installed`;
    }
  }
  return undefined;
}

export const swarmMissing = missingTools();

/** `describe` that needs a dedicated engine: skipped with the reason, failing when required. */
export function describeSwarm(name: string, fn: () => void): void {
  if (!swarmMissing || dockerRequired) describe(name, fn);
  else
    describe.skip(`${name} [skipped: ${swarmMissing}; set REQUIRE_DOCKER=1 to fail instead]`, fn);
}

/** Starts a dockerd in a fresh network namespace and makes it a one-node swarm's manager. */
export async function startSwarmEngine(name: string): Promise<SwarmEngine> {
  const dir = mkdtempSync(path.join(tmpdir(), `${name}-`));
  const sock = path.join(dir, "docker.sock");
  const pidfile = path.join(dir, "dockerd.pid");
  execFileSync("ip", ["netns", "add", name]);
  const nsPath = `/var/run/netns/${name}`;
  execFileSync("nsenter", [`--net=${nsPath}`, "ip", "link", "set", "lo", "up"]);
  // nsenter --net, not `ip netns exec` (that remounts /sys and dockerd loses the devices cgroup).
  // --no-new-privileges: engine 20.10 has no per-service switch for it (decision 0145).
  const child = spawn(
    "nsenter",
    [
      `--net=${nsPath}`,
      "dockerd",
      "--host",
      `unix://${sock}`,
      "--data-root",
      path.join(dir, "data"),
      "--exec-root",
      path.join(dir, "exec"),
      "--pidfile",
      pidfile,
      "--bridge",
      "none",
      "--iptables=false",
      "--no-new-privileges",
    ],
    { stdio: ["ignore", "ignore", "ignore"], detached: false },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const docker = engineClient({ socketPath: sock });
  const stop = async () => {
    await docker.swarmLeave({ force: true }).catch(() => {});
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000).unref())]);
      if (child.exitCode === null) child.kill("SIGKILL");
    }
    try {
      execFileSync("ip", ["netns", "del", name]);
    } catch {
      // already gone
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(async () => (await docker.ping()) !== undefined, {
      timeoutMs: 30_000,
      what: "the test dockerd",
    });
    await docker.swarmInit({ ListenAddr: "127.0.0.1:2377", AdvertiseAddr: "127.0.0.1" });
    const info = await docker.info();
    return {
      name,
      dir,
      host: `unix://${sock}`,
      docker,
      nodeId: (info.Swarm as { NodeID: string }).NodeID,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * A tiny gateway stand-in built inside the test engine: static busybox, user `node` (uid 1000),
 * `httpd` answering `/healthz` on the gateway port. The engine does not share the system
 * engine's images, and loading the 860 MB stand-in (`docker save | docker load`) took 52 s here.
 */
export const TINY_IMAGE = "agent-platform-test-swarm-healthz:1";
export function buildTinyImage(engine: Pick<SwarmEngine, "dir" | "host">): void {
  const ctx = path.join(engine.dir, "image");
  mkdirSync(path.join(ctx, "bin"), { recursive: true });
  mkdirSync(path.join(ctx, "www"), { recursive: true });
  mkdirSync(path.join(ctx, "etc"), { recursive: true });
  if (!existsSync(path.join(ctx, "bin", "busybox"))) {
    writeFileSync(path.join(ctx, "bin", "busybox"), readFileSync("/usr/bin/busybox"), {
      mode: 0o755,
    });
    for (const applet of [
      "sh",
      "httpd",
      "sleep",
      "nc",
      "printf",
      "id",
      "cat",
      "grep",
      "echo",
      "mkdir",
      "chown",
      "ls",
      // The storage test: an agent's writes, and the nodes' storage agent (chroot to the host).
      "dd",
      "touch",
      "rm",
      "chroot",
    ]) {
      symlinkSync("busybox", path.join(ctx, "bin", applet));
    }
  }
  writeFileSync(path.join(ctx, "www", "healthz"), "ok\n");
  writeFileSync(
    path.join(ctx, "etc", "passwd"),
    "root:x:0:0::/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n",
  );
  writeFileSync(path.join(ctx, "etc", "group"), "root:x:0:\nnode:x:1000:\n");
  writeFileSync(
    path.join(ctx, "Dockerfile"),
    [
      "FROM scratch",
      "COPY bin/ /bin/",
      "COPY www/ /www/",
      "COPY etc/ /etc/",
      "USER 1000:1000",
      // The engine's own health check, as the real gateway image has (it runs in the task's
      // container on whichever node: a drain verifies a moved instance by it).
      `HEALTHCHECK --interval=1s --timeout=3s --retries=3 CMD ["sh", "-c", "printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' | nc -w 2 127.0.0.1 ${GATEWAY_PORT} | grep -q ' 200'"]`,
      `CMD ["sh", "-c", "echo hello-from-task; echo oops >&2; exec httpd -f -v -p ${GATEWAY_PORT} -h /www"]`,
      "",
    ].join("\n"),
  );
  execFileSync("docker", ["-H", engine.host, "build", "-q", "-t", TINY_IMAGE, ctx], {
    env: { ...process.env, DOCKER_BUILDKIT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/**
 * Runs a one-shot container attached to `network` (as the platform's own containers join the
 * gateways' attachable overlay) and returns what it printed: proves the gateway's address is
 * reachable from the platform's side of the overlay.
 */
export async function fetchFromOverlay(
  engine: SwarmEngine,
  network: string,
  address: string | undefined,
  urlPath = "/healthz",
): Promise<string> {
  const url = `http://${address}:${GATEWAY_PORT}${urlPath}`;
  const container = await engine.docker.createContainer({
    Image: TINY_IMAGE,
    // nc, not wget: the static busybox's wget looks the "http" service up through NSS and crashes
    // in an image without glibc's NSS modules.
    Cmd: [
      "sh",
      "-c",
      `printf 'GET ${urlPath} HTTP/1.0\r\n\r\n' | nc -w 5 ${address} ${GATEWAY_PORT}`,
    ],
    HostConfig: { NetworkMode: network },
  });
  try {
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    const raw = (await container.logs({ stdout: true, stderr: true })) as unknown as Buffer;
    const { stdout, stderr } = demux(raw);
    const text = stdout + stderr;
    if (StatusCode !== 0) throw new Error(`wget ${url} exited ${StatusCode}: ${text}`);
    return text;
  } finally {
    await container.remove({ force: true }).catch(() => {});
  }
}

/**
 * What a tenant's gateway (`id`, a task of the tiny image) gets when it asks `host:port` for
 * `urlPath`, one address the test made at a time (never a scan): the answer's status line, or
 * "unreached" with why (nc's exit and message: refused, no route, or its 3 s timeout).
 */
export async function probeFrom(
  rt: { exec(id: string, cmd: string[], o?: { timeoutMs?: number }): Promise<ExecResult> },
  id: string,
  host: string | undefined,
  port: number,
  urlPath = "/healthz",
): Promise<string> {
  const out = await rt.exec(
    id,
    ["sh", "-c", `printf 'GET ${urlPath} HTTP/1.0\r\n\r\n' | nc -w 3 ${host} ${port}`],
    { timeoutMs: 20_000 },
  );
  const status = /^HTTP\/1\.[01] \d{3}/.exec(out.stdout)?.[0];
  return status ?? `unreached (exit ${out.exitCode}${out.stderr ? `: ${out.stderr.trim()}` : ""})`;
}
