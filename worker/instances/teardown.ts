import {
  deleteInstanceRecord,
  getInstanceByUser,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { revokeInstanceTokens } from "../../app/server/ai/instance-tokens.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { LABELS } from "../runtime/index.ts";
import { deploymentLabels, rt } from "./engine.ts";
import { withInstanceLock } from "./lock.ts";

// teardown-instance: a deleted user's instance goes entirely (containers, state volume and its
// snapshot, model-endpoint tokens, record).

/** What teardown needs of an instance; the row itself is gone once the account is deleted. */
type TeardownTarget = Pick<InstanceRow, "id" | "user_id" | "container_name" | "volume_name">;

async function teardownTarget(userId: string): Promise<TeardownTarget | undefined> {
  const row = await getInstanceByUser(userId);
  if (row) return row;
  // Kept by a trigger when the account's deletion cascaded to the row (migration 0015).
  const [kept] = await db()<{ instance_id: string; container_name: string; volume_name: string }[]>`
    select instance_id, container_name, volume_name from instance_teardowns
    where user_id = ${userId} order by deleted_at desc limit 1`;
  return kept && { id: kept.instance_id, user_id: userId, ...kept };
}

/** The instance's own container, volumes, tokens and record; returns what was removed. */
async function removeInstance(row: TeardownTarget, removedIds: string[]) {
  const info = await rt().inspect(row.container_name);
  if (info) await rt().remove(info.id);
  await rt().removeVolume(row.volume_name);
  await rt().removeVolume(`${row.volume_name}-prev`);
  const revoked = await revokeInstanceTokens(row.id);
  await deleteInstanceRecord(row.id);
  await db()`delete from instance_teardowns where instance_id = ${row.id}`;
  return {
    containerRemoved: info !== undefined && !removedIds.includes(info.id),
    volumeRemoved: row.volume_name,
    tokensRevoked: revoked,
  };
}

/** Removes the user's container(s), state volume, model-endpoint tokens and record. Idempotent. */
export async function teardown(userId: string) {
  const row = await teardownTarget(userId);
  const containers = await rt().list({ [LABELS.userId]: userId, ...deploymentLabels() });
  const run = async () => {
    for (const c of containers) await rt().remove(c.id);
    if (!row) return { userId, instancesFound: 0, containersRemoved: containers.length };
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
  return row ? withInstanceLock(row.id, run) : run();
}
