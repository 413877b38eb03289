import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract, pack } from "tar-stream";
import {
  type AgentRecords,
  agentRecordsSchema,
  writeAgentRecords,
} from "../../app/server/agents/backup-records.server.ts";
import {
  type BackupRow,
  getBackup,
  insertPendingBackup,
  readStored,
  recordRestore,
  recordRestoreVolumes,
} from "../../app/server/agents/backups.server.ts";
import {
  formatBytes,
  getInstance,
  getInstanceByUser,
  type InstanceRow,
  runtimeNames,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { randomAlphanumeric } from "../../app/server/platform/ids.server.ts";
import { openStream } from "../../app/server/platform/sealed-stream.server.ts";
import { gatewayEndpoint, limitsForPlan } from "../runtime/index.ts";
import { takeBackup } from "./backup.ts";
import { ensureContainer } from "./container.ts";
import { instanceImage, log, ownerLabels, rt, volumeLabels } from "./engine.ts";
import { applyPlatformConfig } from "./gateway-config.ts";
import { waitReady } from "./health.ts";
import { withInstanceLock } from "./lock.ts";
import { observe } from "./observe.ts";
import { connectPaired } from "./pairing.ts";
import { stateBytesOf } from "./restore-size.ts";
import { releaseStateLeases } from "./state-leases.ts";
import { storageLimitFor } from "./storage-limits.ts";
import { removeVolumeOrDefer } from "./volume-removals.ts";

// restore-backup: the backup's state goes into a fresh volume, the gateway boots on it and is
// verified (healthy; paired when it was) before the old volume is discarded and the records are
// put back. Any failure puts the gateway back on its old volume and says why.

/**
 * Writes the decrypted backup's state/ entries into `volume` and returns its records. Throws
 * when the stream is altered or truncated (the GCM tag is checked at its end).
 */
export async function unpackInto(
  sealed: Readable,
  volume: string,
  row: InstanceRow,
): Promise<AgentRecords> {
  const reader = extract();
  const state = pack();
  let records: AgentRecords | undefined;
  const reading = pipeline(Readable.from(openStream(sealed)), reader);
  const splitting = (async () => {
    try {
      for await (const entry of reader) {
        const { header } = entry;
        if (header.name === "records.json") {
          const chunks: Buffer[] = [];
          for await (const chunk of entry) chunks.push(chunk as Buffer);
          records = agentRecordsSchema.parse(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        } else if (/^state(\/|$)/.test(header.name)) {
          await pipeline(entry, state.entry(header));
        } else {
          entry.resume();
        }
      }
      state.finalize();
    } catch (error) {
      state.destroy(error as Error);
      throw error;
    }
  })();
  // tar-stream packs are streamx streams; Readable.from gives the driver a Node stream.
  const importing = rt().importVolume(
    volume,
    instanceImage(row),
    Readable.from(state),
    ownerLabels(row.id),
  );
  const [read, split, imported] = await Promise.allSettled([reading, splitting, importing]);
  for (const result of [read, split, imported]) {
    if (result.status === "rejected") throw result.reason;
  }
  if (!records) throw new Error("the backup holds no records.json");
  const released = await releaseStateLeases(volume, row);
  if (released)
    log().info({ instanceId: row.id, volume, released }, "the saved state's leases released");
  return records;
}

/**
 * The gateway on `volume`: started, healthy, and paired again when it was paired before. Its
 * config on that volume names the model-endpoint token it had when the state was saved, which
 * may have been revoked since: the platform's part is re-applied with fresh tokens, as a repair
 * does.
 */
export async function bootOn(row: InstanceRow, volume: string) {
  const current = await updateInstance(row.id, { volume_name: volume });
  const info = await ensureContainer(current, { recreate: true });
  await waitReady(info);
  // Re-read: the container was recreated, and pairing a state from another installation (an
  // import) approves the device inside the new container, by its id.
  const booted = (await getInstance(row.id)) as InstanceRow;
  if (booted.paired_at) {
    const address = gatewayEndpoint(info);
    if (!address) throw new Error("the restored gateway has no address");
    const { client, row: paired } = await connectPaired(booted, address);
    try {
      await applyPlatformConfig(client, paired);
    } finally {
      client.close();
    }
  }
  await observe((await getInstance(row.id)) as InstanceRow);
}

async function restoreLocked(backup: BackupRow, row: InstanceRow) {
  const limit = await storageLimitFor(row);
  const size = await stateBytesOf(await readStored(backup));
  if (size > limit) {
    throw new Error(
      `the backup's state (${formatBytes(size)}) is larger than the agent's storage limit (${formatBytes(limit)})`,
    );
  }
  const image = instanceImage(row);
  // The state as it is now, so a restore can itself be undone.
  const safety = await insertPendingBackup(
    { id: backup.agent_id, user_id: row.user_id },
    "pre-restore",
  );
  await takeBackup(safety.id, row, image);
  const old = row.volume_name;
  const fresh = `${runtimeNames(row.id).volume}-${randomAlphanumeric(8).toLowerCase()}`;
  await rt().ensureVolume(fresh, volumeLabels(row), {
    limits: limitsForPlan(row.plan),
    storageLimitBytes: await storageLimitFor(row), // decision 0216
  });
  // Recorded before the instance moves, so reconcile can undo a restore whose worker died.
  await recordRestoreVolumes(backup.id, old, fresh);
  let records: AgentRecords;
  try {
    records = await unpackInto(await readStored(backup), fresh, row);
  } catch (error) {
    await removeVolumeOrDefer(fresh);
    throw new Error(`the backup could not be read: ${(error as Error).message}`);
  }
  try {
    await bootOn(row, fresh);
  } catch (error) {
    log().warn(
      { instanceId: row.id, err: error },
      "restored gateway failed; back to the old state",
    );
    await bootOn(row, old).catch((again) =>
      log().error({ instanceId: row.id, err: again }, "the old state did not come back healthy"),
    );
    await removeVolumeOrDefer(fresh);
    throw new Error(`the restored gateway did not come up: ${(error as Error).message}`);
  }
  // The records and the outcome commit together: a restore still `running` has not touched them.
  await db().begin(async (tx) => {
    await writeAgentRecords(backup.agent_id, row.user_id, records, tx);
    await recordRestore(backup.id, "restored", null, tx);
  });
  await removeVolumeOrDefer(old);
  await removeVolumeOrDefer(`${old}-prev`); // the old lineage's update snapshot
}

/** The restore-backup job; its output ({ok, error}) is what the waiting request answers. */
export async function restoreBackup(backupId: string): Promise<{ ok: boolean; error?: string }> {
  const backup = await getBackup(backupId);
  if (!backup) return { ok: false, error: "no such backup" };
  const row = await getInstanceByUser(backup.user_id);
  if (!row) {
    await recordRestore(backupId, "failed", "the agent has no instance");
    return { ok: false, error: "the agent has no instance" };
  }
  try {
    await withInstanceLock(row.id, async () =>
      restoreLocked(backup, (await getInstance(row.id)) as InstanceRow),
    );
    await recordRestore(backupId, "restored");
    return { ok: true };
  } catch (error) {
    const why = (error as Error).message;
    await recordRestore(backupId, "failed", why);
    return { ok: false, error: why };
  }
}
