import { Readable } from "node:stream";
import type { Sql, TransactionSql } from "postgres";
import { z } from "zod";
import {
  BackupChecksumError,
  BackupMissingError,
  backupStore,
  readVerified,
} from "../platform/backup-store.server.ts";
import { db } from "../platform/db.server.ts";
import { txExecutor } from "../platform/db-helpers.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { json } from "../platform/http.server.ts";
import { randomAlphanumeric } from "../platform/ids.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { openStream } from "../platform/sealed-stream.server.ts";
import { getOwnedAgent } from "./agents.server.ts";
import { type AgentRecords, readAgentRecords } from "./backup-records.server.ts";
import { awaitJob, getInstanceByUser } from "./instances.server.ts";

// Per-agent backups (docs/decisions/0140-backups.md): this module owns agent_backups and the
// web side — list, request, delete, download, restore. Taking and restoring one needs the state
// volume, so the worker does it (worker/instances/backup.ts, restore.ts); the web enqueues.

export const BACKUP_REASONS = [
  "manual",
  "scheduled",
  "pre-update",
  "pre-restore",
  "pre-delete",
  "imported",
  "node-returned",
] as const;
export type BackupReason = (typeof BACKUP_REASONS)[number];

export interface BackupRow {
  id: string;
  user_id: string;
  agent_id: string;
  reason: BackupReason;
  status: "pending" | "ready" | "failed";
  store: "local" | "s3";
  object_key: string;
  size_bytes: string | number | null;
  sha256: string | null;
  error: string | null;
  records: unknown;
  restore_status: "running" | "restored" | "failed" | null;
  restore_error: string | null;
  restored_at: Date | null;
  restore_started_at: Date | null;
  restore_old_volume: string | null;
  restore_new_volume: string | null;
  created_at: Date;
  completed_at: Date | null;
}

export const backupParams = z.object({
  id: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9_-]+$/, "must be an agent id"),
  backupId: z
    .string()
    .min(1)
    .max(64)
    .regex(/^bkp_[A-Za-z0-9]+$/, "must be a backup id"),
});

/** How the API and the page show a backup. */
export function backupView(row: BackupRow) {
  return {
    id: row.id,
    agentId: row.agent_id,
    reason: row.reason,
    status: row.status,
    sizeBytes: row.size_bytes === null ? null : Number(row.size_bytes),
    sha256: row.sha256,
    error: row.error,
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
    restore: row.restore_status
      ? {
          status: row.restore_status,
          error: row.restore_error,
          at: row.restored_at?.toISOString() ?? null,
        }
      : null,
  };
}
export type BackupView = ReturnType<typeof backupView>;

export async function getBackup(id: string): Promise<BackupRow | undefined> {
  const [row] = await db()<BackupRow[]>`select * from agent_backups where id = ${id}`;
  return row;
}

/** The newest finished backup of any of the user's agents (the whole state volume is in each). */
export async function latestReadyBackup(userId: string): Promise<BackupRow | undefined> {
  const [row] = await db()<BackupRow[]>`
    select * from agent_backups where user_id = ${userId} and status = 'ready'
    order by completed_at desc nulls last, created_at desc limit 1`;
  return row;
}

/** A pending backup row of the agent (the worker fills it); the object's key is fixed here. */
export async function insertPendingBackup(
  agent: { id: string; user_id: string },
  reason: BackupReason,
  options: { records?: AgentRecords; sql?: Sql | TransactionSql } = {},
): Promise<BackupRow> {
  const id = `bkp_${randomAlphanumeric(20)}`;
  const sql = options.sql ?? db();
  const records = options.records ? sql.json(options.records as never) : null;
  const [row] = await sql<BackupRow[]>`
    insert into agent_backups (id, user_id, agent_id, reason, store, object_key, records)
    values (${id}, ${agent.user_id}, ${agent.id}, ${reason}, ${backupStore().driver},
      ${`${agent.user_id}/${agent.id}/${id}.agbk`}, ${records})
    returning *`;
  return row as BackupRow;
}

export async function completeBackup(id: string, sizeBytes: number, sha256: string) {
  await db()`
    update agent_backups set status = 'ready', size_bytes = ${sizeBytes}, sha256 = ${sha256},
      error = null, records = null, completed_at = now()
    where id = ${id}`;
}

export async function failBackup(id: string, error: string) {
  await db()`
    update agent_backups set status = 'failed', error = ${error.slice(0, 1000)},
      completed_at = now()
    where id = ${id}`;
}

export async function recordRestore(
  id: string,
  status: "running" | "restored" | "failed",
  error: string | null = null,
  sql: Sql | TransactionSql = db(),
) {
  const running = status === "running";
  await sql`
    update agent_backups set restore_status = ${status}, restore_error = ${error?.slice(0, 1000) ?? null},
      restored_at = ${running ? null : new Date()},
      restore_started_at = case when ${running} then now() else restore_started_at end,
      restore_old_volume = case when ${running} then null else restore_old_volume end,
      restore_new_volume = case when ${running} then null else restore_new_volume end
    where id = ${id}`;
}

/** The volumes a running restore moves between, so an interrupted one can be undone. */
export async function recordRestoreVolumes(id: string, oldVolume: string, newVolume: string) {
  await db()`
    update agent_backups set restore_old_volume = ${oldVolume}, restore_new_volume = ${newVolume}
    where id = ${id}`;
}

/** Removes the object, then the row (a missing object is not an error). */
export async function removeBackup(row: BackupRow): Promise<void> {
  await backupStore().delete(row.object_key);
  await db()`delete from agent_backups where id = ${row.id}`;
}

/**
 * The user's agent, or one they deleted whose backups they still have (those stay listable,
 * downloadable and exportable); 404 otherwise.
 */
async function ownedAgentOrBackups(userId: string, agentId: string): Promise<void> {
  const [found] = await db()`
    select 1 from agents where id = ${agentId} and user_id = ${userId}
    union all
    select 1 from agent_backups where agent_id = ${agentId} and user_id = ${userId}
    limit 1`;
  if (!found) throw new DomainError(404, "Agent not found");
}

export async function ownedBackup(userId: string, agentId: string, backupId: string) {
  await ownedAgentOrBackups(userId, agentId);
  const [row] = await db()<BackupRow[]>`
    select * from agent_backups
    where id = ${backupId} and agent_id = ${agentId} and user_id = ${userId}`;
  if (!row) throw new DomainError(404, "Backup not found");
  return row;
}

export async function listBackups(userId: string, agentId: string) {
  await ownedAgentOrBackups(userId, agentId);
  const rows = await db()<BackupRow[]>`
    select * from agent_backups where agent_id = ${agentId} and user_id = ${userId}
    order by created_at desc, id desc`;
  return { backups: rows.map(backupView) };
}

/**
 * The agent's deletion (in its transaction, before its rows go): a pending pre-delete backup
 * holding its records; the worker adds the state volume — the backup-agent job when the
 * gateway stays, the teardown before it removes the volume when this was the last agent.
 */
export async function backupBeforeDeletion(
  agent: { id: string; user_id: string },
  tx: TransactionSql,
  gatewayStays: boolean,
): Promise<string> {
  const records = await readAgentRecords(agent.id, tx);
  const row = await insertPendingBackup(agent, "pre-delete", { records, sql: tx });
  if (gatewayStays) await sendJob("backup-agent", { backupId: row.id }, { db: txExecutor(tx) });
  return row.id;
}

/** Accepts an on-demand backup: a pending row now, the worker takes it (202). */
export async function requestBackup(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  if (!(await getInstanceByUser(userId))) {
    throw new DomainError(409, "The agent has no instance yet: nothing to back up");
  }
  const [running] = await db()<{ id: string }[]>`
    select id from agent_backups where agent_id = ${agentId} and status = 'pending'
      and created_at > now() - interval '1 hour' limit 1`;
  if (running) throw new DomainError(409, "A backup of this agent is already being taken");
  const row = await insertPendingBackup(agent, "manual");
  await sendJob("backup-agent", { backupId: row.id });
  return { backup: backupView(row) };
}

export async function deleteBackup(userId: string, agentId: string, backupId: string) {
  const row = await ownedBackup(userId, agentId, backupId);
  if (row.restore_status === "running") {
    throw new DomainError(409, "The backup is being restored; delete it afterwards");
  }
  await removeBackup(row);
  return { success: true };
}

/** The decrypted backup (a tar: records.json and state/…), checked against its sha256 first. */
export async function downloadBackup(userId: string, agentId: string, backupId: string) {
  const row = await ownedBackup(userId, agentId, backupId);
  if (row.status !== "ready" || !row.sha256) {
    throw new DomainError(409, `The backup is ${row.status}, not ready to download`);
  }
  const sealed = await readStored(row);
  const body = Readable.toWeb(Readable.from(openStream(sealed))) as ReadableStream<Uint8Array>;
  return new Response(body, {
    headers: {
      "content-type": "application/x-tar",
      "content-disposition": `attachment; filename="${agentId}-${row.id}.tar"`,
      "cache-control": "no-store",
    },
  });
}

/** The stored, still encrypted bytes, verified; a corrupted or lost object is a clear 409. */
export async function readStored(row: BackupRow): Promise<Readable> {
  try {
    return await readVerified(backupStore(), row.object_key, row.sha256 ?? "");
  } catch (error) {
    if (error instanceof BackupChecksumError || error instanceof BackupMissingError) {
      throw new DomainError(409, error.message);
    }
    throw error;
  }
}

const restoreOutcome = z.object({ ok: z.boolean(), error: z.string().optional() });

/**
 * Restores the agent's gateway to the backup through the worker and waits for the outcome
 * (BACKUP_RESTORE_WAIT_MS; 202 with the backup when it takes longer). A failed restore leaves
 * the agent as it was: 409 with why.
 */
export async function requestRestore(userId: string, agentId: string, backupId: string) {
  const row = await ownedBackup(userId, agentId, backupId);
  const [agent] = await db()`select 1 from agents where id = ${agentId}`;
  if (!agent) {
    throw new DomainError(
      409,
      "The agent was deleted: export this backup and import it into one of your agents",
    );
  }
  if (row.status !== "ready") throw new DomainError(409, `The backup is ${row.status}, not ready`);
  if (!(await getInstanceByUser(userId))) throw new DomainError(409, "The agent has no instance");
  if (row.restore_status === "running") throw new DomainError(409, "A restore is already running");
  await recordRestore(row.id, "running");
  let jobId: string;
  try {
    jobId = await sendJob("restore-backup", { backupId: row.id });
  } catch (error) {
    await recordRestore(row.id, "failed", "the restore could not be queued");
    throw error;
  }
  const done = await awaitJob("restore-backup", jobId, env().BACKUP_RESTORE_WAIT_MS);
  const latest = (await getBackup(row.id)) ?? row;
  if (!done) return json({ backup: backupView(latest) }, { status: 202 });
  const outcome = restoreOutcome.safeParse(done.output);
  if (done.state !== "completed" || !outcome.success || !outcome.data.ok) {
    const why = (outcome.success && outcome.data.error) || latest.restore_error || "restore failed";
    throw new DomainError(409, `Restore failed, the agent is as it was: ${why}`);
  }
  return { backup: backupView(latest) };
}
