import { channelSettings } from "../../app/server/agents/channels.server.ts";
import { parseEvery, readHeartbeat } from "../../app/server/agents/heartbeat.server.ts";
import {
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import {
  idleSecondsOf,
  markAsleep,
  recordSleep,
  unmarkAsleep,
} from "../../app/server/agents/sleep.server.ts";
import { telegramPendingUpdate } from "../../app/server/channels/telegram.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { FreezeUnavailableError } from "../runtime/index.ts";
import { gatewayAddress, log, rt } from "./engine.ts";
import { tryInstanceLock } from "./lock.ts";
import { memoryIsTight } from "./memory-pressure.ts";
import { connectPaired } from "./pairing.ts";
import { sweepSessions } from "./recorder.ts";

// Scale-to-zero (decisions 0164, 0178): an instance with no chat, channel message or scheduled
// work for its plan's idle period is put to sleep, its memory given back to the host. Where the
// engine can, its gateway is frozen (paused, its memory pushed out to swap) and a wake is an
// unpause; elsewhere it is stopped and a wake boots it. Volume, pairing and config stay either
// way, and a wake starts the same container again (wake.ts).

/** What a frozen gateway keeps resident; the rest of its memory goes to the host's swap. */
const FROZEN_RESIDENT_BYTES = 32 * 1024 ** 2;

/** Log lines kept for GET /api/agents/:id/logs while the agent sleeps. */
const KEPT_LOG_LINES = 500;

/** Running instances whose last activity is older than `idleSeconds` ago, with their plans. */
async function idleCandidates(): Promise<Array<InstanceRow & { active_at: Date }>> {
  return db()<Array<InstanceRow & { active_at: Date }>>`
    select i.*, greatest(i.last_activity_at, i.started_at, i.created_at, (
      select max(m.created_at) from agent_messages m join agents a on a.id = m.agent_id
      where a.user_id = i.user_id)) as active_at
    from instances i
    where i.observed_state = 'running' and i.desired_state = 'running'
      and i.container_id is not null`;
}

/**
 * The idle period that applies now: the plan's, or SLEEP_TIGHT_IDLE_SECONDS when memory is tight
 * and that is shorter (decision 0222). A plan whose agents never sleep is not shortened.
 */
const idlePeriod = (plan: string, tight: boolean): number | null => {
  const idle = idleSecondsOf(plan);
  if (idle === null || !tight) return idle;
  return Math.min(idle, env().SLEEP_TIGHT_IDLE_SECONDS);
};

const isIdle = (row: InstanceRow & { active_at: Date }, now: number, tight = false) => {
  const idle = idlePeriod(row.plan, tight);
  return idle !== null && row.active_at.getTime() <= now - idle * 1000;
};

/**
 * Which of the running instances are due for sleep now, coldest (longest idle) first: those
 * past their plan's idle period, and while memory is tight those past SLEEP_TIGHT_IDLE_SECONDS.
 */
export function dueForSleep<R extends InstanceRow & { active_at: Date }>(
  candidates: R[],
  now: number,
  tight: boolean,
): R[] {
  return candidates
    .filter((c) => isIdle(c, now, tight))
    .sort((a, b) => a.active_at.getTime() - b.active_at.getTime());
}

/** The highest Telegram update already waiting when the gateway stopped (it has seen those). */
async function telegramPosition(userId: string): Promise<number | null> {
  const telegram = (await channelSettings(userId)).chatapp1;
  if (!telegram) return null;
  try {
    return await telegramPendingUpdate(telegram.token);
  } catch (error) {
    log().warn({ err: error, userId }, "sleep: Telegram could not be read; watching from zero");
    return null;
  }
}

/** Sweeps of its sessions one sleep tries before it gives up for this pass. */
const RECORD_SWEEPS = 3;
/** Passes in a row whose recording failed after which the sleep goes on without it. */
const MAX_UNRECORDED_PASSES = 3;
/** Passes in a row whose recording failed, by instance (this worker's; a new one starts at 0). */
const unrecordedPasses = new Map<string, number>();

/**
 * Its conversations recorded before it goes down: a turn whose recording failed (a read that met
 * a changing session, an event missed) would otherwise wait for the next wake, and its messages
 * would lack it all the while (issue 52's soak). Under load a read can run past its bound (CI
 * met a 15 s `chat.history` timeout), so the sweep is tried again, and when it still fails the
 * instance stays awake for the next pass (false). It goes down anyway while memory is tight (the
 * wake records the turn) or after MAX_UNRECORDED_PASSES, so one unreadable session cannot keep
 * a gateway awake for good.
 */
export async function recordBeforeSleep(
  row: Pick<InstanceRow, "id" | "user_id">,
  client: GatewayClient,
  tight: boolean,
): Promise<boolean> {
  const seen = new Map<string, unknown>(); // sessions recorded by an earlier sweep are skipped
  let failure: unknown;
  for (let sweep = 0; sweep < RECORD_SWEEPS; sweep++) {
    try {
      await sweepSessions({ client, row, seen });
      unrecordedPasses.delete(row.id);
      return true;
    } catch (error) {
      failure = error;
    }
  }
  const passes = (unrecordedPasses.get(row.id) ?? 0) + 1;
  const goesOn = tight || passes >= MAX_UNRECORDED_PASSES;
  if (goesOn) unrecordedPasses.delete(row.id);
  else unrecordedPasses.set(row.id, passes);
  log().warn(
    { err: failure, instanceId: row.id, passes, tight },
    goesOn
      ? "sleep: recording its sessions failed; sleeping anyway (the wake records them)"
      : "sleep: recording its sessions failed; stays awake until the next pass",
  );
  return goesOn;
}

/**
 * Puts one idle instance to sleep (the caller holds its lock) unless a chat came after
 * `idleSince`; `tight`: the host's memory is (a failed recording does not keep it awake then).
 * Scheduled work keeps it awake: a gateway with a heartbeat on runs agent turns by itself, which
 * a stopped gateway cannot.
 */
export async function sleepInstance(
  row: InstanceRow,
  idleSince = new Date(),
  tight = false,
): Promise<string> {
  const info = await rt().inspect(row.container_name);
  const address = gatewayAddress(info);
  if (!info?.running || !address) return "not running";
  const { client } = await connectPaired(row, address);
  let logLines: string[];
  try {
    const { configured } = await readHeartbeat(client);
    const every = typeof configured.every === "string" ? parseEvery(configured.every) : undefined;
    // OpenClaw's default (30m) applies when unset; the platform writes 0m for "off".
    if ((every ?? 1) > 0) return "heartbeat scheduled: stays awake";
    const tail = await client.request<{ lines?: string[] }>("logs.tail", {
      limit: KEPT_LOG_LINES,
      maxBytes: 200_000,
    });
    logLines = (tail.lines ?? []).slice(-KEPT_LOG_LINES);
    if (!(await recordBeforeSleep(row, client, tight))) return "recording failed: stays awake";
  } finally {
    client.close();
  }
  // One last sample: stats of a sleeping agent answer from it.
  const s = await rt().stats(info.id);
  await updateInstance(row.id, {
    cpu_percent: s.cpuPercent,
    memory_bytes: s.memoryBytes,
    memory_limit_bytes: s.memoryLimitBytes,
    pids: s.pids,
    network_rx_bytes: s.rxBytes,
    network_tx_bytes: s.txBytes,
    sampled_at: new Date(),
  });
  // Asleep from here on: a chat now asks for a wake instead of reaching a gateway being stopped.
  if (!(await markAsleep(row.id, idleSince))) return "active again";
  let how: "frozen" | "stopped";
  try {
    how = await putDown(info.id);
  } catch (error) {
    // Not stopped (the engine refused or went away): still awake, not a sleeper whose running
    // gateway nothing observes.
    await unmarkAsleep(row.id);
    throw error;
  }
  // A stopped sleeper's address is the engine's to give away (decision 0195); a frozen one
  // keeps its own, and wake.ts records the address it wakes on either way.
  if (how === "stopped") await updateInstance(row.id, { gateway_address: null });
  // Read after the stop: while the gateway polls, a second getUpdates would answer 409. A frozen
  // gateway's poll can still be open (up to 30 s): Telegram ends one of the two with 409. If it
  // is this read, the watcher wakes on any waiting update (at worst one the gateway had read but
  // not confirmed); if it is the gateway's, OpenClaw polls again once thawed (a recoverable
  // conflict in its polling monitor).
  await recordSleep(row.id, {
    logLines,
    telegramSeenUpdateId: await telegramPosition(row.user_id),
  });
  log().info({ instanceId: row.id, how }, "instance put to sleep");
  return "sleeping";
}

/** Freezes the gateway where the engine can (AGENT_SLEEP_MODE), else stops it. */
async function putDown(containerId: string): Promise<"frozen" | "stopped"> {
  const mode = env().AGENT_SLEEP_MODE;
  const runtime = rt();
  if (mode !== "stop" && runtime.freeze) {
    try {
      await runtime.freeze(containerId, FROZEN_RESIDENT_BYTES);
      return "frozen";
    } catch (error) {
      if (mode === "freeze" || !(error instanceof FreezeUnavailableError)) throw error;
      log().info({ err: error, containerId }, "sleep: the gateway cannot be frozen; stopping it");
    }
  }
  await runtime.stop(containerId, 10);
  return "stopped";
}

/**
 * The periodic pass: every idle instance to sleep, coldest first; a busy one (locked) waits for
 * the next. While the host's memory is tight (decision 0222) the idle period is shortened, until
 * enough has been put to sleep that it is not tight any more.
 */
export async function sleepIdleInstances(now = Date.now()): Promise<Record<string, string>> {
  if (env().AGENT_SLEEP !== "on") return {};
  const results: Record<string, string> = {};
  const candidates = await idleCandidates();
  let tight = await memoryIsTight();
  for (const candidate of dueForSleep(candidates, now, tight)) {
    // Re-checked: the pass may have freed enough that the shortened period no longer applies.
    if (!isIdle(candidate, now, tight)) continue;
    try {
      const outcome = await tryInstanceLock(candidate.id, async () => {
        const fresh = await getInstance(candidate.id);
        // Re-read under the lock: a chat or an action may have come in since the list was read.
        const [still] = await idleCandidates().then((rows) =>
          rows.filter((r) => r.id === candidate.id),
        );
        if (!fresh || !still || !isIdle(still, now, tight)) return "active again";
        const idle = idlePeriod(still.plan, tight) ?? 0;
        return sleepInstance(fresh, new Date(now - idle * 1000), tight);
      });
      // Each sleep gives memory back: once it is not tight, only the plans' periods apply.
      if (tight && outcome === "sleeping") tight = await memoryIsTight();
      results[candidate.id] = outcome ?? "busy";
    } catch (error) {
      log().warn({ err: error, instanceId: candidate.id }, "putting an instance to sleep failed");
      results[candidate.id] = `error: ${(error as Error).message}`;
    }
  }
  return results;
}
