import {
  deleteInstanceRecord,
  getInstanceByUser,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { revokeInstanceTokens } from "../../app/server/ai/instance-tokens.server.ts";
import { backupStore } from "../../app/server/platform/backup-store.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { LABELS } from "../runtime/index.ts";
import { takePendingBeforeTeardown } from "./backup.ts";
import { deploymentLabels, removeGatewayNetwork, rt } from "./engine.ts";
import { withInstanceLock } from "./lock.ts";
import { removeVolumeOrDefer } from "./volume-removals.ts";

// teardown-instance: a deleted user's instance, or a deleted last agent's, goes entirely
// (containers, state volume and its snapshot, model-endpoint tokens, record).

/** What teardown needs of an instance; the row itself is gone once the account is deleted. */
type TeardownTarget = Pick<InstanceRow, "id" | "user_id" | "container_name" | "volume_name">;

async function teardownTarget(
  userId: string,
  instanceId?: string,
): Promise<TeardownTarget | undefined> {
  const row = instanceId ? undefined : await getInstanceByUser(userId);
  if (row) return row;
  // Kept by a trigger when the account's deletion cascaded to the row (migration 0015), or by
  // the deletion of the user's last agent (that one names its instance).
  const [kept] = await db()<{ instance_id: string; container_name: string; volume_name: string }[]>`
    select instance_id, container_name, volume_name from instance_teardowns
    where user_id = ${userId} ${instanceId ? db()`and instance_id = ${instanceId}` : db()``}
    order by deleted_at desc limit 1`;
  return kept && { id: kept.instance_id, user_id: userId, ...kept };
}

/** The instance's own container, volumes, tokens and record; returns what was removed. */
async function removeInstance(row: TeardownTarget, removedIds: string[]) {
  const info = await rt().inspect(row.container_name);
  if (info) await rt().remove(info.id);
  for (const volume of [row.volume_name, `${row.volume_name}-prev`]) {
    // Whatever still mounts the volume (a dead job's one-shot, anything else) would make its
    // removal fail with 409 "volume is in use" on every retry: it goes first.
    for (const holder of await rt().volumeHolders(volume)) await rt().remove(holder.id);
    await removeVolumeOrDefer(volume);
  }
  await removeGatewayNetwork(row.container_name);
  const revoked = await revokeInstanceTokens(row.id);
  await deleteInstanceRecord(row.id);
  await db()`delete from instance_teardowns where instance_id = ${row.id}`;
  return {
    containerRemoved: info !== undefined && !removedIds.includes(info.id),
    volumeRemoved: row.volume_name,
    tokensRevoked: revoked,
  };
}

/**
 * Removes the user's container(s), state volume, model-endpoint tokens and record. Idempotent.
 * With `instanceId` (an agent deletion: the account lives on and may already have a new
 * instance) only that instance's container and volume go.
 */
export async function teardown(userId: string, instanceId?: string) {
  const row = await teardownTarget(userId, instanceId);
  const containers = await rt().list(
    instanceId
      ? { [LABELS.instanceId]: instanceId, ...deploymentLabels() }
      : { [LABELS.userId]: userId, ...deploymentLabels() },
  );
  const run = async () => {
    for (const c of containers) await rt().remove(c.id);
    if (!row) return { userId, instancesFound: 0, containersRemoved: containers.length };
    // The gateway is stopped: the deleted agent's backup copies a consistent volume.
    if (instanceId) await takePendingBeforeTeardown(userId, row);
    const removed = await removeInstance(
      row,
      containers.map((c) => c.id),
    );
    return {
      userId,
      instancesFound: 1,
      containersRemoved: containers.length + (removed.containerRemoved ? 1 : 0),
      volumeRemoved: removed.volumeRemoved,
      tokensRevoked: removed.tokensRevoked,
    };
  };
  const result = await (row ? withInstanceLock(row.id, run) : run());
  // An erased account's backups go with it (their rows went with the user); never a live one's.
  const [alive] = await db()`select 1 from users where id = ${userId}`;
  if (!instanceId && !alive) await backupStore().deletePrefix(`${userId}/`);
  return result;
}
