import { userBootPending } from "../../app/server/agents/boot-queue.server.ts";
import {
  getInstance,
  type InstancePatch,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { finishBootRun, provisioningUnderWay } from "../../app/server/agents/progress.server.ts";
import { restartPending } from "../../app/server/agents/restart-queue.server.ts";
import { gatewayHealthy } from "../../app/server/openclaw/health.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import type { ContainerInfo } from "../runtime/index.ts";
import { settleBootWeight } from "./boot-weight.ts";
import { gatewayAddress, isUp, rt } from "./engine.ts";

/**
 * Whether the gateway answers /healthz: a quick probe, then a patient one. A booting gateway
 * refuses the connection at once, so only a slow one waits: on a loaded host a healthy gateway
 * took more than 2 s to answer, and one slow probe turned a running agent into `starting`
 * (CI, 2026-11-25: a woken agent stayed `starting` after it had answered a chat).
 */
async function answersHealthz(address: string): Promise<boolean> {
  return (await gatewayHealthy(address, 2_000)) || gatewayHealthy(address, 10_000);
}

/**
 * Down, but reconcile has queued its restart, or a user's boot waits, for a boot slot (decisions
 * 0240, 0241): on its way back, as it was when it was booted at once, not `stopped` or `crashed`.
 */
async function restartWaits(row: InstanceRow): Promise<boolean> {
  if (row.desired_state !== "running") return false;
  return (await restartPending(row.id)) || userBootPending(row.id);
}

/** The observed state of a container that exists; a running one by its gateway's /healthz. */
async function observedState(
  row: InstanceRow,
  info: ContainerInfo,
  address: string | undefined,
): Promise<Pick<InstanceRow, "observed_state" | "health">> {
  // A sleeper's gateway that still runs is being put down (a stop waits up to 10 s for it): a
  // wake records `starting` before it starts one, so only the sleep's end changes this state.
  if (row.observed_state === "sleeping" && info.running) {
    return { observed_state: "sleeping", health: "unknown" };
  }
  if (info.running) {
    const ok = address ? await answersHealthz(address) : false;
    // A provisioning pairs and warms up the gateway after it is healthy, and marks it running
    // itself once chats can reach it: until then it is still starting (the chat page showed
    // "not provisioned yet" under a `running` badge when this pass ran in between).
    if (ok && !row.paired_at && (await provisioningUnderWay(row.id))) {
      return { observed_state: "starting", health: "healthy" };
    }
    return { observed_state: ok ? "running" : "starting", health: ok ? "healthy" : "unhealthy" };
  }
  // Stopped on purpose while idle (worker/instances/sleep.ts): still asleep, not stopped.
  if (row.observed_state === "sleeping") return { observed_state: "sleeping", health: "unknown" };
  // Paused but not asleep: a backup reading its files (decision 0180) for about a second. The
  // state stays as it was; a pause whose worker died is undone by reconcile's start.
  if (info.state === "paused") return { observed_state: row.observed_state, health: row.health };
  if (await restartWaits(row)) return { observed_state: "starting", health: "unknown" };
  if (info.oomKilled) return { observed_state: "oom_killed", health: "unknown" };
  const crashed = info.state === "exited" && row.desired_state === "running" && info.exitCode !== 0;
  return { observed_state: crashed ? "crashed" : "stopped", health: "unknown" };
}

/**
 * Writes an observation begun at `since` unless the row was observed or changed by an action
 * since (its observed_at is later): an inspect and a health probe take seconds (more on a busy
 * engine), and a sampler pass that read a gateway stopped for a move, then wrote after the move
 * recorded the new task, left the row without an address (chats answered 502 "the agent is not
 * running") until its next pass. Returns the row as it is now.
 */
async function writeObservation(
  id: string,
  since: Date,
  patch: Omit<InstancePatch, "observed_at">,
): Promise<InstanceRow> {
  const values = { ...patch, observed_at: since, updated_at: new Date() } as Record<
    string,
    unknown
  >;
  const [written] = await db()<InstanceRow[]>`
    update instances set ${db()(values as Record<string, never>)}
    where id = ${id} and (observed_at is null or observed_at <= ${since})
    returning *`;
  if (written) return written;
  const now = await getInstance(id);
  if (!now) throw new Error(`instance ${id} is gone`);
  return now;
}

/** Reads the container and gateway state into the row (used after every action). */
export async function observe(listed: InstanceRow): Promise<InstanceRow> {
  const since = new Date();
  // The row as it is now, not as the caller listed it: a sampler pass lists every instance, then
  // probes them one by one (seconds each on a loaded host), and an instance put to sleep since
  // (a newer state, the container stopping) was read by its stale `running` as a crash, which
  // reconcile then restarted (the soak: agents asleep by stop came back as "gateway exited with
  // code 0/137", still booting minutes later). A change after `since` drops this write instead.
  const row = (await getInstance(listed.id)) ?? listed;
  const info = await rt().inspect(row.container_name);
  if (!info) {
    const missing = (await restartWaits(row)) ? "starting" : "missing";
    return writeObservation(row.id, since, {
      observed_state: row.container_id ? missing : "new",
      health: "unknown",
    });
  }
  const address = gatewayAddress(info);
  const state = await observedState(row, info, address);
  const seen = await writeObservation(row.id, since, {
    container_id: info.id,
    ...state,
    // Only a container that is up holds its address: a stopped one's is the engine's to give
    // away, and no credential may follow it there (decision 0195).
    gateway_address: isUp(info) ? (address ?? null) : null,
    started_at: info.startedAt ? new Date(info.startedAt) : row.started_at,
    ...(state.health === "healthy" ? { healthy_at: since } : {}),
  });
  // A gateway that has booted weighs its plan's CPU again (decision 0250).
  await settleBootWeight(row, info, state.health === "healthy");
  if (seen.observed_at?.getTime() !== since.getTime()) return seen; // a newer one stands
  // A started, restarted or woken gateway answering now ends its progress run (decision 0158).
  if (state.observed_state === "running" && row.observed_state !== "running") {
    await finishBootRun(row.id);
  }
  return seen;
}
