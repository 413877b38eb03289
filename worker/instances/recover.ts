import { latestReadyBackup, readStored } from "../../app/server/agents/backups.server.ts";
import { getInstance, recordError } from "../../app/server/agents/instances.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { isClusterRuntime, limitsForPlan, type StaleVolume } from "../runtime/index.ts";
import { backupInstanceAgents } from "./backup.ts";
import { clusterRuntime, type LostInstance, lostInstances, verifyHealthy } from "./drain.ts";
import { instanceImage, log, ownerLabels, rt, volumeLabels } from "./engine.ts";
import { gatewayOwner } from "./gateway-owner.ts";
import { withInstanceLock } from "./lock.ts";
import { unpackInto } from "./restore.ts";

// A node that went away (down, or removed from the swarm) holds its instances' state volumes out
// of reach. Each such instance is re-created on a node with room from its latest backup when it
// has one (state as of that backup), else reported on the instance (last_error) for an operator:
// its state comes back only with the node. When such a node comes back, the copies it still
// holds of re-created instances' volumes are kept as backups, then removed (settleStaleVolumes).
// docs/decisions/0167-draining-nodes.md

export interface Recovery extends LostInstance {
  outcome: "recreated" | "reported" | "failed";
  to?: string;
  backupId?: string;
  message: string;
}

async function recoverOne(lost: LostInstance): Promise<Recovery> {
  const row = await getInstance(lost.instanceId);
  if (!row) {
    return { ...lost, outcome: "reported", message: "no instance record for this container" };
  }
  const backup = await latestReadyBackup(row.user_id);
  if (!backup) {
    const message = `Its node ${lost.nodeId} is ${lost.state} and there is no backup to re-create it from: it comes back with the node`;
    await recordError(row.id, message);
    return { ...lost, outcome: "reported", message };
  }
  const cluster = clusterRuntime();
  const limits = limitsForPlan(row.plan);
  try {
    // A fresh state volume on a node with room (the lost one is not ready, so not a candidate),
    // the backup's state in it, and the instance pinned there.
    await cluster.ensureVolume(row.volume_name, volumeLabels(row), { limits });
    await unpackInto(await readStored(backup), row.volume_name, row);
    const to = await cluster.nodeOfVolume(row.volume_name);
    if (!to) throw new Error("the new state volume is on no ready node");
    await cluster.pin(lost.id, to);
    if (row.desired_state === "running") {
      await cluster.start(lost.id);
      await verifyHealthy(lost.id, env().GATEWAY_HEALTH_TIMEOUT_MS);
    }
    const message = `Re-created on node ${to} from backup ${backup.id} (${backup.created_at.toISOString()}) after node ${lost.nodeId} went ${lost.state}`;
    await recordError(row.id, message);
    return { ...lost, outcome: "recreated", to, backupId: backup.id, message };
  } catch (error) {
    const message = `Its node ${lost.nodeId} is ${lost.state}; re-creating it from backup ${backup.id} failed: ${(error as Error).message}`;
    log().warn({ instanceId: row.id, err: error }, "re-creating a lost instance failed");
    await recordError(row.id, message);
    return { ...lost, outcome: "failed", backupId: backup.id, message };
  }
}

/**
 * Re-creates (or reports) every instance pinned to a node that is not ready (or only to that
 * node), one at a time.
 */
export async function recoverLostInstances(nodeId?: string): Promise<Recovery[]> {
  const out: Recovery[] = [];
  for (const lost of await lostInstances()) {
    if (nodeId && lost.nodeId !== nodeId) continue;
    out.push(
      lost.instanceId
        ? await withInstanceLock(lost.instanceId, () => recoverOne(lost))
        : { ...lost, outcome: "reported", message: "a gateway service with no instance id" },
    );
  }
  return out;
}

export interface Settled extends StaleVolume {
  outcome: "removed" | "failed";
  /** The backups the left-behind state was kept in (one per agent of the instance's user). */
  backupIds: string[];
  message?: string;
}

const same = (a: StaleVolume, b: StaleVolume) =>
  a.volume === b.volume && a.nodeId === b.nodeId && a.instanceId === b.instanceId;

/**
 * A node that came back still holds the volumes of instances re-created elsewhere meanwhile:
 * state newer than the backup they were re-created from, which no gateway uses. Each copy is
 * kept as a backup of the user's agents (reason node-returned, restorable like any other), then
 * removed, so that only the live copy answers for the volume. A failed backup keeps the copy
 * for the next pass.
 */
export async function settleStaleVolumes(): Promise<Settled[]> {
  const runtime = rt();
  if (!isClusterRuntime(runtime)) return [];
  const out: Settled[] = [];
  for (const stale of await runtime.staleVolumes()) {
    // The volume's label names the id it was made for (a pooled one's, if adopted).
    const owner = await gatewayOwner({ labelled: stale.instanceId, volume: stale.volume });
    const instanceId = owner.kind === "instance" ? owner.instanceId : stale.instanceId;
    const settled = await withInstanceLock(instanceId, async (): Promise<Settled | null> => {
      // Still stale under the lock (a drain or a recovery may have moved it meanwhile).
      if (!(await runtime.staleVolumes()).some((s) => same(s, stale))) return null;
      const row = await getInstance(instanceId);
      try {
        const backupIds = row
          ? await backupInstanceAgents(row, "node-returned", undefined, () =>
              runtime.exportVolumeOn(
                stale.volume,
                instanceImage(row),
                stale.nodeId,
                ownerLabels(row.id),
              ),
            )
          : [];
        await runtime.removeVolumeOn(stale.volume, stale.nodeId);
        log().info(
          { ...stale, backupIds },
          "a returned node's stale state volume kept and removed",
        );
        return { ...stale, outcome: "removed", backupIds };
      } catch (error) {
        log().warn({ ...stale, err: error }, "settling a stale state volume failed");
        return { ...stale, outcome: "failed", backupIds: [], message: (error as Error).message };
      }
    });
    if (settled) out.push(settled);
  }
  return out;
}
