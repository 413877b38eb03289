import { randomBytes } from "node:crypto";
import type postgres from "postgres";
import { z } from "zod";
import { recordAudit } from "../platform/audit.server.ts";
import { batchedRead } from "../platform/batched-read.server.ts";
import { seal, unseal } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";
import { isDatabaseUnavailable } from "../platform/db-unavailable.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";
import { getBoss, sendJob } from "../platform/jobs.server.ts";
import { shutdownSignal } from "../platform/shutdown.server.ts";
import { agentAddress } from "./agent-address.server.ts";
import { engineAnswers } from "./engine-health.server.ts";

// Instances: one gateway container per user. This module owns the `instances` table and the
// web side of the lifecycle: the web never calls Docker; it enqueues a job, awaits its
// completion through PostgreSQL (pg-boss's job row) with a timeout, and reads what the worker
// observed (state, health, live samples) from the row.

export const OBSERVED_STATES = [
  "new",
  "provisioning",
  "starting",
  "running",
  "stopped",
  "crashed",
  "oom_killed",
  "missing",
  "updating",
  "error",
  // The engine does not answer: the last observation cannot be vouched for (engine-health).
  "unknown",
  // Put to sleep while idle: container stopped, woken by the next message (decision 0164).
  "sleeping",
] as const;
export type ObservedState = (typeof OBSERVED_STATES)[number];

export interface InstanceRow {
  id: string;
  user_id: string;
  driver: "docker" | "process" | "swarm";
  plan: string;
  container_id: string | null;
  container_name: string;
  volume_name: string;
  desired_state: "running" | "stopped";
  observed_state: ObservedState;
  health: "unknown" | "healthy" | "unhealthy";
  image: string | null;
  image_id: string | null;
  gateway_version: string | null;
  gateway_address: string | null;
  gateway_token_sealed: string;
  device_id: string | null;
  device_private_key_sealed: string | null;
  device_token_sealed: string | null;
  paired_at: Date | null;
  /** PLATFORM_CONFIG_VERSION of the platform's config part it has (worker/instances/gateway-config). */
  platform_config_version: number | null;
  model: string | null;
  last_error: string | null;
  last_error_at: Date | null;
  oom_kills: number;
  crash_restarts: number;
  next_restart_at: Date | null;
  started_at: Date | null;
  /** When an observation last saw its gateway answer /healthz (a hung boot never has). */
  healthy_at: Date | null;
  observed_at: Date | null;
  cpu_percent: number | null;
  memory_bytes: number | null;
  memory_limit_bytes: number | null;
  pids: number | null;
  network_rx_bytes: number | null;
  network_tx_bytes: number | null;
  sampled_at: Date | null;
  /** Size of the state volume (measured by reconcile); null until first measured. */
  storage_bytes: number | null;
  storage_measured_at: Date | null;
  /** The hard limit last applied to the volume (decision 0216); null: none (not enforced). */
  storage_limit_bytes: number | null;
  /** Highest usage warning sent since usage was last below 80 % (0, 80 or 95). */
  storage_warned_percent: number;
  /** A lower limit waits until then while the data is above it (decision 0217). */
  storage_grace_until: Date | null;
  /** The last chat relayed to the gateway (idle detection, decision 0164). */
  last_activity_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export type InstancePatch = Partial<Omit<InstanceRow, "id" | "user_id" | "created_at">>;

/** Container, hostname and volume names are derived from the instance id (stable). */
export function runtimeNames(instanceId: string) {
  const name = `agent-${instanceId}`;
  return { container: name, hostname: name, volume: `${name}-state` };
}

export const newGatewayToken = () => randomBytes(32).toString("hex");

export async function getInstanceByUser(userId: string): Promise<InstanceRow | undefined> {
  const [row] = await db()<InstanceRow[]>`select * from instances where user_id = ${userId}`;
  return row;
}

/** What the stats show of an instance: its status and its latest sample. */
export type InstanceSample = StatusFields &
  Pick<
    InstanceRow,
    | "sampled_at"
    | "started_at"
    | "cpu_percent"
    | "memory_bytes"
    | "memory_limit_bytes"
    | "network_rx_bytes"
    | "network_tx_bytes"
    | "pids"
  >;

// Stats calls made at once read their samples in one statement (batched-read.server.ts).
const samplesOf = batchedRead(async (userIds: string[]) => {
  const rows = await db()<(InstanceSample & { user_id: string })[]>`
    select user_id, observed_state, desired_state, health, sampled_at, started_at, cpu_percent,
      memory_bytes, memory_limit_bytes, network_rx_bytes, network_tx_bytes, pids
    from instances where user_id = any(${userIds}::text[])`;
  return new Map(rows.map(({ user_id, ...sample }) => [user_id, sample]));
});

/** The user's instance's status and latest sample: only those columns, read on every stats call. */
export function getInstanceSampleByUser(userId: string): Promise<InstanceSample | undefined> {
  return samplesOf(userId);
}

export async function getInstance(id: string): Promise<InstanceRow | undefined> {
  const [row] = await db()<InstanceRow[]>`select * from instances where id = ${id}`;
  return row;
}

export async function listInstances(): Promise<InstanceRow[]> {
  return db()<InstanceRow[]>`select * from instances order by created_at`;
}

/** The user's instance record, created (with a fresh sealed gateway token) when none exists. */
export async function ensureInstanceRecord(
  userId: string,
  options: { plan?: string; model?: string } = {},
): Promise<InstanceRow> {
  const id = `ins_${randomBytes(9).toString("base64url").replace(/[-_]/g, "x").toLowerCase()}`;
  const names = runtimeNames(id);
  const [created] = await db()<InstanceRow[]>`
    insert into instances (id, user_id, plan, container_name, volume_name, gateway_token_sealed,
      model, desired_state)
    values (${id}, ${userId}, ${options.plan ?? "solo"}, ${names.container}, ${names.volume},
      ${seal(newGatewayToken())}, ${options.model ?? null}, 'running')
    on conflict (user_id) do nothing
    returning *`;
  if (created) return created;
  const existing = await getInstanceByUser(userId);
  if (!existing) throw new Error("instance record vanished while being created");
  return existing;
}

export async function updateInstance(id: string, patch: InstancePatch): Promise<InstanceRow> {
  const values = { ...patch, updated_at: new Date() } as Record<string, unknown>;
  const [row] = await db()<InstanceRow[]>`
    update instances set ${db()(values as Record<string, never>)} where id = ${id} returning *`;
  if (!row) throw notFound("Instance");
  return row;
}

export async function deleteInstanceRecord(id: string): Promise<void> {
  await db()`delete from instances where id = ${id}`;
}

/**
 * Takes an instance out of service in the caller's transaction: its row goes, and what the
 * worker's teardown needs (container and volume names) is kept in instance_teardowns.
 */
export async function retireInstance(
  sql: postgres.TransactionSql,
  row: Pick<InstanceRow, "id" | "user_id" | "container_name" | "volume_name">,
): Promise<void> {
  await sql`
    insert into instance_teardowns (instance_id, user_id, container_name, volume_name)
    values (${row.id}, ${row.user_id}, ${row.container_name}, ${row.volume_name})
    on conflict (instance_id) do nothing`;
  await sql`delete from instances where id = ${row.id}`;
}

export async function recordError(id: string, message: string, patch: InstancePatch = {}) {
  return updateInstance(id, {
    ...patch,
    last_error: message.slice(0, 2000),
    last_error_at: new Date(),
  });
}

export function gatewayTokenOf(row: InstanceRow): string {
  return unseal(row.gateway_token_sealed);
}

// --- views of the contract ----------------------------------------------------------------

/**
 * The contract's `status`: running, stopped or error; transitional states are shown as such, and
 * `unknown` while the engine does not answer (docs/decisions/0130-crash-recovery-and-engine-health.md).
 */
export function contractStatus(row: Pick<InstanceRow, "observed_state" | "health">): string {
  switch (row.observed_state) {
    case "running":
      return row.health === "unhealthy" ? "error" : "running";
    case "new":
    case "stopped":
      return "stopped";
    case "crashed":
    case "oom_killed":
    case "missing":
    case "error":
      return "error";
    default:
      return row.observed_state; // provisioning, starting, updating
  }
}

/** What an agent's status is made of. */
export type StatusFields = Pick<InstanceRow, "observed_state" | "desired_state" | "health">;

/** An agent's status is its instance's (one gateway runs all of a user's agents). */
export function agentStatus(instance: StatusFields | undefined): string {
  if (!instance) return "provisioning";
  if (instance.observed_state === "new" && instance.desired_state === "running") {
    return "provisioning";
  }
  return contractStatus(instance);
}

/** The instance's address: its owner's id names the gateway that runs all their agents. */
export function addressOf(row: InstanceRow): { subdomain: string; url: string } {
  return agentAddress(row.user_id);
}

/** GET /api/instance/:userId (contract "Instance"). */
export function instanceView(row: InstanceRow) {
  const { subdomain, url } = addressOf(row);
  return {
    userId: row.user_id,
    status: contractStatus(row),
    startedAt: row.started_at?.toISOString() ?? null,
    subdomain,
    url,
    plan: row.plan,
    gatewayVersion: row.gateway_version ?? "unknown",
  };
}

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
export function formatBytes(n: number): string {
  if (n >= GiB) return `${Number((n / GiB).toFixed(2))}GiB`;
  return `${Number((n / MiB).toFixed(1))}MiB`;
}

/**
 * Is the row's sample fresh enough to call live: the instance observed running and sampled
 * within a few sampler periods? Otherwise its figures are stale (the engine or worker is gone).
 */
export function liveSample(
  instance: Pick<InstanceRow, "observed_state" | "sampled_at"> | undefined,
  now = Date.now(),
): boolean {
  if (instance?.observed_state !== "running" || !instance.sampled_at) return false;
  const bound = Math.max(env().INSTANCE_SAMPLE_INTERVAL_MS * 4, 30_000);
  return now - instance.sampled_at.getTime() <= bound;
}

/** GET /api/instance/:userId/stats (contract "Instance stats"), from the worker's last sample. */
export function instanceStatsView(row: InstanceRow) {
  const live = liveSample(row);
  return {
    userId: row.user_id,
    cpu: `${live ? (row.cpu_percent ?? 0).toFixed(2) : "0.00"}%`,
    memory: live
      ? `${formatBytes(row.memory_bytes ?? 0)} / ${formatBytes(row.memory_limit_bytes ?? 0)}`
      : `0MiB / ${formatBytes(row.memory_limit_bytes ?? 0)}`,
    status: contractStatus(row),
    plan: row.plan,
    gatewayVersion: row.gateway_version ?? "unknown",
    // Beyond the contract: whether these figures are not live, and when they were sampled.
    stale: !live,
    sampledAt: row.sampled_at?.toISOString() ?? null,
  };
}

// --- lifecycle requests (web → job → worker) ------------------------------------------------

export const LIFECYCLE_ACTIONS = ["start", "stop", "restart", "repair", "reset-memory"] as const;
export type LifecycleAction = (typeof LIFECYCLE_ACTIONS)[number];

/** What the instance-action job returns (stored as the job's output). */
export const actionOutcomeSchema = z.object({
  ok: z.boolean(),
  /** unavailable: Docker or the gateway did not answer (502); capacity: no node has room for
   * the instance (503); internal: anything else (500). */
  failure: z.enum(["unavailable", "capacity", "internal"]).optional(),
  message: z.string().optional(),
  status: z.string().optional(),
});
export type ActionOutcome = z.infer<typeof actionOutcomeSchema>;

const backendUnavailable = () =>
  new DomainError(502, "Instance backend unavailable", { success: false, status: "error" });
const noCapacity = () =>
  new DomainError(503, "No capacity for this instance right now; try again later", {
    success: false,
    status: "error",
  });
const internalFailure = () =>
  new DomainError(500, "Instance operation failed", { success: false, status: "error" });

export async function requireInstance(userId: string): Promise<InstanceRow> {
  const row = await getInstanceByUser(userId);
  if (!row) throw notFound("Instance");
  return row;
}

/**
 * Polls the job's row until it finishes or the timeout passes (no worker → 502); undefined also
 * when the web begins to stop (the caller answers with what is known now).
 */
export async function awaitJob(
  name: string,
  jobId: string,
  timeoutMs: number,
): Promise<{ state: string; output: unknown } | undefined> {
  const boss = await getBoss();
  const deadline = Date.now() + timeoutMs;
  const stopping = shutdownSignal();
  let delay = 25;
  while (Date.now() < deadline && !stopping.aborted) {
    const job = await boss.getJobById(name, jobId);
    if (job && (job.state === "completed" || job.state === "failed" || job.state === "cancelled")) {
      return { state: job.state, output: job.output };
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, delay);
      function done() {
        clearTimeout(timer);
        stopping.removeEventListener("abort", done);
        resolve();
      }
      stopping.addEventListener("abort", done, { once: true });
    });
    delay = Math.min(delay * 2, 250);
  }
  return undefined;
}

/**
 * Runs a lifecycle action through the worker and waits for it. Returns the job's outcome;
 * throws 502 when the backend (worker, Docker, gateway) does not answer, 500 on other failures.
 */
export async function runLifecycle(
  userId: string,
  action: LifecycleAction,
): Promise<ActionOutcome> {
  const row = await requireInstance(userId);
  const audit = (outcome: "success" | "failure") =>
    recordAudit({
      action: "instance.action",
      userId,
      target: row.id,
      outcome,
      details: { action },
    });
  try {
    let jobId: string;
    try {
      jobId = await sendJob("instance-action", { instanceId: row.id, action });
    } catch (error) {
      // A database that is away is answered 503 by the route builder (decision 0223).
      if (isDatabaseUnavailable(error)) throw error;
      throw internalFailure();
    }
    const done = await awaitJob("instance-action", jobId, env().INSTANCE_ACTION_TIMEOUT_MS);
    if (!done) throw backendUnavailable();
    // The handler never throws (its outcome is its output): a failed job is one whose worker
    // died or lost the database mid-action (the heartbeat monitor failed it): the backend.
    if (done.state === "failed") throw backendUnavailable();
    const parsed = actionOutcomeSchema.safeParse(done.output);
    if (done.state !== "completed" || !parsed.success) throw internalFailure();
    if (!parsed.data.ok) {
      const failure = parsed.data.failure;
      throw failure === "unavailable"
        ? backendUnavailable()
        : failure === "capacity"
          ? noCapacity()
          : internalFailure();
    }
    await audit("success");
    return parsed.data;
  } catch (error) {
    await audit("failure");
    throw error;
  }
}

/**
 * Accepts an image update when it can run: 502 while the engine does not answer (the update
 * would fail); otherwise the job recreates the container (retried through a later outage) and
 * GET shows its progress.
 */
export async function requestImageUpdate(userId: string): Promise<void> {
  const row = await requireInstance(userId);
  if (!(await engineAnswers())) throw backendUnavailable();
  try {
    await sendJob("update-image", { instanceId: row.id });
  } catch {
    throw internalFailure();
  }
  await recordAudit({
    action: "instance.action",
    userId,
    target: row.id,
    details: { action: "update" },
  });
}

/** The gateway token, generating the instance record (and its token) when none exists. */
export async function instanceToken(userId: string, plan?: string): Promise<string> {
  const row = (await getInstanceByUser(userId)) ?? (await ensureInstanceRecord(userId, { plan }));
  try {
    return gatewayTokenOf(row);
  } catch {
    throw internalFailure();
  }
}

/** Creates the record and enqueues provisioning (the agents' provisioning flow calls this). */
export async function provisionInstance(
  userId: string,
  options: { plan?: string; model?: string } = {},
): Promise<{ instance: InstanceRow; jobId: string }> {
  const instance = await ensureInstanceRecord(userId, options);
  const jobId = await sendJob("provision-instance", { instanceId: instance.id });
  return { instance, jobId };
}

// --- the lifecycle API's service functions (routes stay thin) ---------------------------------
// Every route is `auth: "user"` and passes :userId through `ownUserId` first: another user's id
// answers 404, exactly like a user without an instance.

/** The path's user id when it is the caller's own; 404 otherwise (never reveal others). */
export function ownUserId(pathUserId: string, callerId: string, what = "Instance"): string {
  if (pathUserId !== callerId) throw notFound(what);
  return pathUserId;
}

export const instanceParams = z.object({
  userId: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9_.:-]+$/, "must be a user id"),
});

export async function startInstance(userId: string) {
  await runLifecycle(userId, "start");
  return { success: true, status: "running" };
}

export async function stopInstance(userId: string) {
  await runLifecycle(userId, "stop");
  return { success: true, status: "stopped" };
}

export async function restartInstance(userId: string) {
  await runLifecycle(userId, "restart");
  return { success: true, status: "running" };
}

export async function updateInstanceImage(userId: string) {
  await requestImageUpdate(userId);
  return { success: true, status: "running" };
}

export async function repairInstance(userId: string) {
  const outcome = await runLifecycle(userId, "repair");
  return { success: true, message: outcome.message ?? "Instance repaired" };
}

export async function resetInstanceMemory(userId: string) {
  const outcome = await runLifecycle(userId, "reset-memory");
  return { success: true, message: outcome.message ?? "Memory reset" };
}

export async function readInstance(userId: string) {
  return instanceView(await requireInstance(userId));
}

export async function readInstanceStats(userId: string) {
  return instanceStatsView(await requireInstance(userId));
}

/** Bytes the user's agent state takes (0 without an instance or before the first measure). */
export async function storageUsedBytes(userId: string): Promise<number> {
  const row = await getInstanceByUser(userId);
  return Number(row?.storage_bytes ?? 0);
}

export async function readInstanceToken(userId: string) {
  return { token: await instanceToken(userId) };
}

// --- the operator console's views --------------------------------------------------------------

export interface PoolFigures {
  /** The configured size, or "auto": each worker decides (decision 0159). */
  size: number | "auto";
  ready: number;
  filling: number;
}

/** The warm pool: the target size, the gateways ready to adopt and those still starting. */
export async function poolFigures(): Promise<PoolFigures> {
  const [row] = await db()<{ ready: number; filling: number }[]>`
    select count(*) filter (where state = 'ready')::int as ready,
           count(*) filter (where state = 'starting')::int as filling
    from gateway_pool`;
  return {
    size: env().RUNTIME_POOL_SIZE ?? "auto",
    ready: row?.ready ?? 0,
    filling: row?.filling ?? 0,
  };
}

export interface InstanceOverview {
  id: string;
  userId: string;
  ownerEmail: string;
  desiredState: string;
  observedState: string;
  status: string;
  image: string | null;
  cpuPercent: number | null;
  memoryBytes: number | null;
  memoryLimitBytes: number | null;
  sampledAt: string | null;
  lastSeen: string | null;
  lastError: string | null;
}

/** Every instance with its owner and last sample (operators). */
export async function instancesOverview(): Promise<InstanceOverview[]> {
  const rows = await db()<(InstanceRow & { email: string })[]>`
    select i.*, u.email from instances i join users u on u.id = i.user_id
    order by i.created_at, i.id`;
  return rows.map((r) => ({
    id: r.id,
    userId: r.user_id,
    ownerEmail: r.email,
    desiredState: r.desired_state,
    observedState: r.observed_state,
    status: contractStatus(r),
    image: r.image,
    cpuPercent: r.cpu_percent,
    memoryBytes: r.memory_bytes === null ? null : Number(r.memory_bytes),
    memoryLimitBytes: r.memory_limit_bytes === null ? null : Number(r.memory_limit_bytes),
    sampledAt: r.sampled_at?.toISOString() ?? null,
    lastSeen: (r.sampled_at ?? r.observed_at)?.toISOString() ?? null,
    lastError: r.last_error,
  }));
}
