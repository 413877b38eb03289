import http from "node:http";
import https from "node:https";
import Docker from "dockerode";
import { RuntimeUnavailableError } from "./types.ts";

// The Docker engine's connection and its answers: an unreachable socket as
// RuntimeUnavailableError, the HTTP status of an engine error, the multiplexed log stream.

/**
 * The engine's connections: a keep-alive pool of their own per process, not the global agent's.
 * Test support (test/setup/engine-connections.ts) makes them plain sockets beside msw, whose
 * interceptors are for third-party HTTP and lost engine answers under load (decision 0233).
 */
export const engineAgents = {
  http: new http.Agent({ keepAlive: true }),
  https: new https.Agent({ keepAlive: true }),
};

/** A dockerode client for `options` (engineAddress's, or a socket path) over engineAgents. */
export function engineClient(options: Docker.DockerOptions = { socketPath: engineSocket() }) {
  // docker-modem takes an agent; dockerode's option types do not list it.
  const withAgent: Docker.DockerOptions & { agent: http.Agent } = {
    ...options,
    agent: options.protocol === "https" ? engineAgents.https : engineAgents.http,
  };
  return new Docker(withAgent);
}

const ENGINE_DOWN = new Set(["ECONNREFUSED", "ENOENT", "EACCES", "ECONNRESET", "EPIPE"]);

export function statusOf(error: unknown): number | undefined {
  return (error as { statusCode?: number }).statusCode;
}

/** Maps "the socket does not answer" to RuntimeUnavailableError; other errors pass through. */
function wrap(error: unknown, engine: string): never {
  const code = (error as NodeJS.ErrnoException).code;
  if (code && ENGINE_DOWN.has(code)) {
    throw new RuntimeUnavailableError(`${engine} unreachable (${code})`, { cause: error });
  }
  throw error;
}

/**
 * How long an engine call may go unanswered. A frozen or wedged engine accepts connections and
 * never answers; unbounded, its caller would hold an instance's lock for good. Calls that wait
 * by design (a one-shot's wait, an upload of a whole state) pass their own bound or none.
 */
export const ENGINE_CALL_BOUND_MS = 120_000;

/**
 * An engine call: its errors mapped (wrap), and failed once it goes unanswered for `boundMs`.
 * `engine` names it in the errors (the Swarm driver's manager calls say "Swarm manager").
 */
export async function call<T>(
  fn: () => Promise<T>,
  boundMs = ENGINE_CALL_BOUND_MS,
  engine = "Docker engine",
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const unanswered = new Promise<never>((_, reject) => {
    if (!Number.isFinite(boundMs)) return;
    timer = setTimeout(
      () => reject(new RuntimeUnavailableError(`${engine} did not answer within ${boundMs} ms`)),
      boundMs,
    );
  });
  try {
    return await Promise.race([fn(), unanswered]);
  } catch (error) {
    return wrap(error, engine);
  } finally {
    clearTimeout(timer);
  }
}

/** Splits Docker's multiplexed stdout/stderr stream (8-byte frame headers). */
export function demux(buffer: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let i = 0;
  while (i + 8 <= buffer.length) {
    const type = buffer[i];
    const size = buffer.readUInt32BE(i + 4);
    const chunk = buffer.subarray(i + 8, i + 8 + size);
    (type === 2 ? err : out).push(chunk);
    i += 8 + size;
  }
  if (i === 0 && buffer.length > 0 && buffer[0] !== 1 && buffer[0] !== 2) {
    return { stdout: buffer.toString("utf8"), stderr: "" }; // a TTY stream is not framed
  }
  return {
    stdout: Buffer.concat(out).toString("utf8"),
    stderr: Buffer.concat(err).toString("utf8"),
  };
}

/** dockerode's connection options for a Docker host URL (unix:///path or tcp://host:port). */
export function engineAddress(host: string): Docker.DockerOptions {
  const url = new URL(host);
  if (url.protocol === "unix:") return { socketPath: url.pathname };
  if (url.protocol === "tcp:" || url.protocol === "http:") {
    return { host: url.hostname, port: Number(url.port || 2375), protocol: "http" };
  }
  if (url.protocol === "https:") {
    return { host: url.hostname, port: Number(url.port || 2376), protocol: "https" };
  }
  throw new Error(`unsupported Docker host ${host} (unix://, tcp:// or https://)`);
}

/** The engine's socket: DOCKER_SOCKET, else DOCKER_HOST when it names a unix socket. */
export function engineSocket(): string {
  const host = process.env.DOCKER_HOST;
  if (process.env.DOCKER_SOCKET) return process.env.DOCKER_SOCKET;
  if (host?.startsWith("unix://")) return host.slice("unix://".length);
  return "/var/run/docker.sock";
}
