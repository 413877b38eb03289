import {
  engineHealth,
  recordEngineCheck,
  recordEngineCpus,
  recordLiveRestore,
} from "../../app/server/agents/engine-health.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import type { ContainerInfo } from "../runtime/index.ts";
import { log, rt } from "./engine.ts";

// The worker's check of the container engine: a ping every ENGINE_CHECK_INTERVAL_MS, recorded
// in runtime_engines (the web reads it). While the engine does not answer, instances are marked
// `unknown`; when it answers again (or at the worker's first check) a reconcile pass is queued at
// once, so an instance whose container exited meanwhile is healed within seconds, and whether
// the engine keeps its containers through a restart (live-restore) is read and recorded.

/** A ping that does not answer within this bound counts as down (a hung daemon). */
const PING_TIMEOUT_MS = 3_000;

/** How often the engine's settings are read again while it stays up. */
const SETTINGS_READ_EVERY_MS = 60_000;
/** When this process last read them (0: never), and what live-restore was. */
let settingsReadAt = 0;
let lastLiveRestore: boolean | undefined;

async function ping(): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      rt().ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error("no answer to ping")), PING_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** One check: records it; returns what changed ("returned", "lost") or the steady state. */
export async function checkEngine(): Promise<"returned" | "lost" | "up" | "down"> {
  let error: string | undefined;
  try {
    await ping();
  } catch (e) {
    error = (e as Error).message;
  }
  const previous = await recordEngineCheck(error === undefined, error);
  if (error !== undefined) {
    if (previous !== false) log().warn({ err: error }, "container engine does not answer");
    return previous === false ? "down" : "lost";
  }
  if (previous === true) {
    // An engine restarted between two checks is never seen gone: read the setting now and then.
    if (Date.now() - settingsReadAt > SETTINGS_READ_EVERY_MS) await readEngineSettings();
    return "up";
  }
  if (previous === false) log().info("container engine answers again: reconciling at once");
  await sendJob("reconcile", {});
  await readEngineSettings();
  return "returned";
}

/**
 * Reads and records whether the engine keeps gateways running while it restarts (decision
 * 0239), each time it answers again and once a minute: an engine may come back with another
 * setting. The warning is logged when the setting is first read or changes. Without it
 * an engine restart or upgrade stops every gateway, and all of them boot again at once.
 */
async function checkLiveRestore(): Promise<void> {
  const runtime = rt();
  if (!runtime.liveRestore) return;
  let liveRestore: boolean;
  try {
    liveRestore = await runtime.liveRestore();
  } catch (error) {
    log().warn({ err: error }, "could not read the engine's live-restore setting");
    return;
  }
  const changed = lastLiveRestore === undefined || liveRestore !== lastLiveRestore;
  lastLiveRestore = liveRestore;
  await recordLiveRestore(liveRestore);
  if (!liveRestore && changed) {
    log().warn(
      'the Docker engine runs without live-restore: its restart or upgrade stops every gateway, and all of them boot again at once. Set "live-restore": true in /etc/docker/daemon.json (docs/operations.md)',
    );
  }
}

/** The host's CPU count, which sizes its chat-turn budget (decision 0251). */
async function checkCpus(): Promise<void> {
  const cpus = await rt()
    .engineCpus?.()
    .catch((error: unknown) => {
      log().warn({ err: error }, "could not read the engine host's CPU count");
      return undefined;
    });
  if (cpus !== undefined) await recordEngineCpus(cpus);
}

/** What the engine says of itself (live-restore, its CPUs), when it answers and once a minute. */
async function readEngineSettings(): Promise<void> {
  settingsReadAt = Date.now();
  await checkLiveRestore();
  await checkCpus();
}

/** Checks the engine every ENGINE_CHECK_INTERVAL_MS; returns a stop function. */
export function startEngineWatch(): () => void {
  const every = env().ENGINE_CHECK_INTERVAL_MS;
  if (every <= 0) return () => {};
  let running = false;
  const tick = () => {
    if (running) return;
    running = true;
    checkEngine()
      .catch((error) => log().warn({ err: error }, "engine check could not be recorded"))
      .finally(() => {
        running = false;
      });
  };
  tick();
  const timer = setInterval(tick, every);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * How long before the check that saw the engine gone its containers may have stopped: the engine
 * stops them first (up to their 10 s stop timeout), then stops answering, then a check notices.
 */
const SHUTDOWN_SLACK_MS = 15_000;

/**
 * Whether an exited container was stopped by the engine's own shutdown (an outage since
 * recovered), not by its gateway: it exited between the engine's loss (less the slack) and its
 * return. Such an exit is no error of the gateway's (issue 52: the healthy row kept "gateway
 * exited with code 0", and the agent showed `error` until it was observed again).
 */
export async function stoppedWithEngine(info: ContainerInfo | undefined): Promise<boolean> {
  if (!info || info.running || info.oomKilled || !info.finishedAt) return false;
  const engine = await engineHealth();
  if (!engine?.reachable || !engine.lostAt) return false;
  const finished = new Date(info.finishedAt).getTime();
  const from = engine.lostAt.getTime() - env().ENGINE_CHECK_INTERVAL_MS - SHUTDOWN_SLACK_MS;
  return finished >= from && finished <= engine.changedAt.getTime();
}
