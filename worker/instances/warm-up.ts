import { getInstance, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import { runTurn } from "../../app/server/agents/talk.server.ts";
import { warmUpTag } from "../../app/server/ai/warmup-tag.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { gatewayAddress, log, rt } from "./engine.ts";
import { forgetSession } from "./forget-session.ts";
import { waitHealthy } from "./health.ts";
import { connectPaired } from "./pairing.ts";

// The dry run (decisions 0038, 0087): a gateway's first agent turn after a boot pays its
// first-run cost (20–22 s at 1 CPU here) or fails on OpenClaw's state-lock contention, so the
// platform runs one turn itself first, answered by its own model endpoint, and forgets it.
// Pooled gateways do it before they are ready (pool-fill.ts); a tenant's gateway after
// provisioning and after every boot (start, restart, repair, update, a crash healed), under the
// tenant's own token with a tagged prompt (app/server/ai/warmup-tag.server.ts).

export const WARMUP_MESSAGE = "Warm-up: reply with OK.";
const WARMUP_ATTEMPTS = 3;
/** A gateway up longer than this has served turns or been warmed up already. */
const BOOT_WINDOW_MS = 10 * 60_000;

/**
 * One dry-run turn of the `main` agent in a new session, which is then forgotten (reset,
 * deleted with its transcript, archives removed). A failed turn is retried in a new session
 * (a fresh gateway's first run can fail, and the turn is what warms it); the failed session is
 * forgotten all the same. Throws when every attempt failed. Returns the attempts made.
 */
export async function dryRunTurn(
  client: GatewayClient,
  containerId: string,
  message: string,
  context: Record<string, string>,
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const { key } = await client.request<{ key: string }>(
      "sessions.create",
      { agentId: "main" },
      { timeoutMs: 60_000 },
    );
    let failed: unknown;
    try {
      await runTurn(client, key, message);
    } catch (error) {
      failed = error;
      log().warn({ err: error, ...context, attempt }, "warm-up turn failed");
    }
    await forgetSession(client, containerId, key);
    if (!failed) return attempt;
    if (attempt >= WARMUP_ATTEMPTS) throw failed;
  }
}

/**
 * The dry run of a tenant's gateway, over a paired connection: the tagged prompt goes to the
 * tenant's model through the platform, which answers it itself. Best effort: true when done,
 * false (logged) when it failed; the gateway works either way, only its first turn is slower.
 */
export async function warmUpTenant(
  client: GatewayClient,
  row: Pick<InstanceRow, "id">,
  containerId: string,
): Promise<boolean> {
  const t0 = Date.now();
  try {
    const attempts = await dryRunTurn(
      client,
      containerId,
      `${WARMUP_MESSAGE} ${warmUpTag(row.id)}`,
      {
        instanceId: row.id,
      },
    );
    log().info({ instanceId: row.id, ms: Date.now() - t0, attempts }, "gateway warmed up");
    return true;
  } catch (error) {
    log().warn({ err: error, instanceId: row.id }, "the gateway's dry run failed");
    return false;
  }
}

/**
 * warm-up-instance: once a booted gateway is healthy, its dry run. Skipped when warm-ups are
 * off, the instance is not meant to run, or its gateway has been up long enough to be warm.
 * Holds no instance lock: a stop or restart meanwhile is never kept waiting (the dry run then
 * fails and is logged).
 */
export async function warmUpAfterBoot(instanceId: string) {
  if (env().RUNTIME_COLD_WARMUP !== "on") return { skipped: "RUNTIME_COLD_WARMUP is off" };
  const row = await getInstance(instanceId);
  if (!row?.container_id || row.desired_state !== "running") return { skipped: "not running" };
  const info = await rt().inspect(row.container_name);
  if (!info?.running) return { skipped: "not running" };
  const upMs = info.startedAt ? Date.now() - Date.parse(info.startedAt) : 0;
  if (upMs > BOOT_WINDOW_MS) return { skipped: `up for ${Math.round(upMs / 1000)} s already` };
  await waitHealthy(info);
  const { client } = await connectPaired(row, gatewayAddress(info) as string);
  try {
    const t0 = Date.now();
    return { warmed: await warmUpTenant(client, row, info.id), ms: Date.now() - t0 };
  } finally {
    client.close();
  }
}

/** Enqueues warm-up-instance after a boot (when warm-ups are on); never throws. */
export async function queueWarmUp(instanceId: string): Promise<void> {
  if (env().RUNTIME_COLD_WARMUP !== "on") return;
  await sendJob("warm-up-instance", { instanceId }).catch((error: unknown) =>
    log().warn({ err: error, instanceId }, "warm-up-instance could not be enqueued"),
  );
}
