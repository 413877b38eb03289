import { execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { until } from "../until.ts";

// The soak's engine fault: the Docker engine stopped for a while and started again. Through
// systemd where it runs the engine; else (a machine whose dockerd was started by hand, as
// .ci/run and the development notes do) the dockerd of its pidfile, stopped with SIGTERM and
// started again with its own command line.

const run = promisify(execFile);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PIDFILE = "/var/run/docker.pid";

const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** true once the engine answers; undefined while it does not (until's "not yet"). */
const answers = () =>
  run("docker", ["version", "--format", "{{.Server.Version}}"]).then(
    () => true as const,
    () => undefined,
  );

/** Stops the engine for `ms`, starts it again and waits until it answers; says how. */
export async function stopEngineFor(ms: number, root: string): Promise<string> {
  if (existsSync("/run/systemd/system")) {
    await run("systemctl", ["stop", "docker.socket", "docker"]);
    await pause(ms);
    await run("systemctl", ["start", "docker"]);
    await until("the engine answering", 120_000, answers, 250);
    return `systemctl stop docker; ${ms / 1000} s; systemctl start docker`;
  }
  const pid = Number(readFileSync(PIDFILE, "utf8").trim());
  const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  const [command, ...args] = argv;
  if (!command || !/dockerd$/.test(command)) throw new Error(`${PIDFILE} names ${command}`);
  const t0 = Date.now();
  process.kill(pid, "SIGTERM");
  await until(`dockerd ${pid} exiting`, 120_000, async () => (alive(pid) ? undefined : true), 250);
  const stopped = Date.now() - t0;
  await pause(ms);
  const logs = path.join(root, ".data", "ci");
  mkdirSync(logs, { recursive: true });
  const log = openSync(path.join(logs, "dockerd.log"), "a");
  const child = spawn(command, args, { detached: true, stdio: ["ignore", log, log] });
  child.unref();
  await until("the engine answering", 120_000, answers, 250);
  return `dockerd ${pid} stopped (SIGTERM, ${stopped} ms); ${ms / 1000} s; started again as ${child.pid}`;
}
