import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { pack } from "tar-stream";
import { readAgentRecords } from "../../app/server/agents/backup-records.server.ts";
import {
  type BackupReason,
  type BackupRow,
  completeBackup,
  failBackup,
  getBackup,
  insertPendingBackup,
} from "../../app/server/agents/backups.server.ts";
import { getInstanceByUser, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import { backupStore, digest } from "../../app/server/platform/backup-store.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { sealStream } from "../../app/server/platform/sealed-stream.server.ts";
import { RuntimeUnavailableError } from "../runtime/index.ts";
import { instanceImage, log, ownerLabels, rt } from "./engine.ts";
import { withBackupLock, withInstanceLock } from "./lock.ts";
import { withoutRegenerable } from "./regenerable.ts";

// backup-agent: the agent's gateway state volume and its platform records, as one tar
// (records.json first, then the volume under state/ without what the gateway rebuilds),
// encrypted, checksummed and stored.

/** A tar entry without the end-of-archive blocks, so the volume's own tar can follow it. */
async function recordsEntry(records: unknown): Promise<Buffer> {
  const body = Buffer.from(JSON.stringify(records));
  const p = pack();
  p.entry({ name: "records.json", size: body.length, mode: 0o600, mtime: new Date() }, body);
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of p) chunks.push(chunk as Buffer);
  const whole = Buffer.concat(chunks);
  return whole.subarray(0, whole.length - 1024); // tar-stream ends with two 512-byte zero blocks
}

async function* plaintext(records: unknown, volumeTar: NodeJS.ReadableStream) {
  yield await recordsEntry(records);
  for await (const chunk of volumeTar) yield Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
}

/** What taking a backup needs of an instance (a torn-down one has no image recorded). */
export type BackupSource = Pick<InstanceRow, "id" | "volume_name"> &
  Partial<Pick<InstanceRow, "image" | "image_id" | "container_name">>;

const nothing = async () => {};

/**
 * Pauses the gateway for the copy. The engine can fail to freeze a gateway that is starting a
 * process at that instant ("unable to freeze", seen right after a provisioning): one more try
 * two seconds later, then the copy is taken unpaused, as it was before decision 0180, rather
 * than no backup at all.
 */
async function pauseGateway(row: BackupSource): Promise<() => Promise<void>> {
  const runtime = rt();
  if (!row.container_name || !runtime.pauseForCopy) return nothing;
  for (let attempt = 1; ; attempt++) {
    try {
      return await runtime.pauseForCopy(row.container_name);
    } catch (error) {
      if (error instanceof RuntimeUnavailableError) throw error;
      if (attempt >= 2) {
        log().warn({ instanceId: row.id, err: error }, "gateway not paused: copied as it runs");
        return nothing;
      }
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
  }
}

/**
 * The instance's volume as the runtime finds it, its gateway paused while the copy is read when
 * it runs (decision 0180): a running gateway writes its SQLite databases and session files, and a
 * copy read file by file while it does so could be torn. `release` unpauses it.
 */
async function liveVolume(row: BackupSource, image: string) {
  const release = await pauseGateway(row);
  try {
    const tar = await rt().exportVolume(row.volume_name, image, ownerLabels(row.id));
    return { tar, release };
  } catch (error) {
    await release();
    throw error;
  }
}

/**
 * A backup sealed into its temp file, not yet stored; without `sealed` the row was ready already
 * (a second delivery of the job).
 */
export interface CopiedBackup {
  backup: BackupRow;
  sealed?: { path: string; size: number };
}

/** A failed step: recorded on the row, its temp file removed, rethrown. */
async function fail(id: string, tmp: string, error: unknown): Promise<never> {
  await rm(tmp, { force: true });
  await failBackup(id, (error as Error).message);
  throw error;
}

/**
 * Copies the pending backup `id` of an instance's agent into a sealed temp file (the caller holds
 * the instance lock: nothing updates or restores the volume while it is read).
 */
export async function copyBackup(
  id: string,
  row: BackupSource,
  image = instanceImage(row),
  /** Where the state comes from: the instance's live volume (liveVolume) by default. */
  volumeTar?: () => Promise<NodeJS.ReadableStream>,
): Promise<CopiedBackup> {
  const backup = await getBackup(id);
  if (!backup) throw new Error(`backup ${id} is gone`);
  if (backup.status === "ready") return { backup }; // a second delivery of the job
  const tmpDir = join(env().DATA_DIR, "backups-tmp");
  const tmp = join(tmpDir, `${id}.part`);
  let release = nothing;
  try {
    await mkdir(tmpDir, { recursive: true, mode: 0o700 });
    // A deletion captured the records before the rows went; otherwise they are read now.
    const records = backup.records ?? (await readAgentRecords(backup.agent_id));
    const copyStarted = performance.now();
    let volume: NodeJS.ReadableStream;
    if (volumeTar) volume = await volumeTar();
    else ({ tar: volume, release } = await liveVolume(row, image));
    // Sealed into a local file at disk speed: the gateway is paused only for this.
    await pipeline(
      Readable.from(sealStream(plaintext(records, withoutRegenerable(volume)))),
      createWriteStream(tmp, { mode: 0o600 }),
    );
    await release();
    release = nothing;
    const copyMs = Math.round(performance.now() - copyStarted);
    const { size } = await stat(tmp);
    log().info({ backupId: id, instanceId: row.id, copyMs, size }, "backup copied");
    return { backup, sealed: { path: tmp, size } };
  } catch (error) {
    await release().catch((e: unknown) => log().warn({ err: e, backupId: id }, "unpause failed"));
    return fail(id, tmp, error);
  }
}

/** Checksums and stores a copy (no lock needed: an upload can take minutes). */
export async function storeBackup({ backup, sealed }: CopiedBackup): Promise<BackupRow> {
  if (!sealed) return backup;
  try {
    const { sha256 } = await digest(createReadStream(sealed.path));
    await backupStore().putFile(backup.object_key, sealed.path);
    await completeBackup(backup.id, sealed.size, sha256);
    return (await getBackup(backup.id)) as BackupRow;
  } catch (error) {
    return fail(backup.id, sealed.path, error);
  }
}

/**
 * Takes the pending backup `id` of an instance's agent, stored before it returns (the caller
 * holds the instance lock). Returns the finished row; a failure is recorded on the row and
 * rethrown.
 */
export async function takeBackup(
  id: string,
  row: BackupSource,
  image = instanceImage(row),
  volumeTar?: () => Promise<NodeJS.ReadableStream>,
) {
  return storeBackup(await copyBackup(id, row, image, volumeTar));
}

/**
 * The pending pre-delete backups of a user's agents on this instance, taken before teardown
 * removes its volume. A failure is recorded on the backup and does not stop the teardown.
 */
export async function takePendingBeforeTeardown(userId: string, source: BackupSource) {
  const pending = await db()<{ id: string }[]>`
    select id from agent_backups
    where user_id = ${userId} and reason = 'pre-delete' and status = 'pending'`;
  for (const { id } of pending) {
    await takeBackup(id, source).catch((error) =>
      log().warn({ backupId: id, err: error }, "pre-delete backup failed"),
    );
  }
  return pending.length;
}

/**
 * The backup-agent job: copied under the instance lock (an update or restore is not half-copied),
 * stored after it, so a wake or an update does not wait for an upload.
 */
export async function runBackupJob(id: string) {
  const backup = await getBackup(id);
  if (!backup) return { skipped: "no such backup" };
  const row = await getInstanceByUser(backup.user_id);
  if (!row) {
    await failBackup(id, "the agent has no instance");
    return { failed: "no instance" };
  }
  // Docker would create a missing volume for the copy's helper: an empty backup, and a volume
  // nobody removes. An instance never started (or whose state is gone) has nothing to copy.
  if (!(await rt().volumeExists(row.volume_name))) {
    await failBackup(id, "the agent's state volume does not exist (never started, or removed)");
    return { failed: "no state volume" };
  }
  const done = await withBackupLock(id, async () =>
    storeBackup(await withInstanceLock(row.id, () => copyBackup(id, row))),
  );
  return { backupId: id, sizeBytes: Number(done.size_bytes), sha256: done.sha256 };
}

/**
 * One backup per agent of the instance's user (the volume is the user's gateway, shared by
 * their agents), for a reason such as pre-update. The caller holds the instance lock.
 */
export async function backupInstanceAgents(
  row: InstanceRow,
  reason: BackupReason,
  image?: string,
  volumeTar?: () => Promise<NodeJS.ReadableStream>,
): Promise<string[]> {
  const agents = await db()<{ id: string; user_id: string }[]>`
    select id, user_id from agents where user_id = ${row.user_id} order by created_at, id`;
  const ids: string[] = [];
  for (const agent of agents) {
    const pending = await insertPendingBackup(agent, reason);
    await takeBackup(pending.id, row, image, volumeTar);
    ids.push(pending.id);
  }
  log().info({ instanceId: row.id, reason, backups: ids.length }, "instance backed up");
  return ids;
}
