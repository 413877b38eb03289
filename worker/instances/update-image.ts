import {
  blockedReason,
  gatewayVersionPolicy,
} from "../../app/server/agents/gateway-versions.server.ts";
import {
  getInstance,
  type InstanceRow,
  recordError,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { limitsForPlan } from "../runtime/index.ts";
import { backupInstanceAgents } from "./backup.ts";
import { ensureContainer } from "./container.ts";
import { isUp, log, ownerLabels, rt, volumeLabels } from "./engine.ts";
import { waitReady } from "./health.ts";
import { withInstanceLock } from "./lock.ts";
import { observe } from "./observe.ts";
import { type RunProgress, startRun } from "./run-progress.ts";
import { copyStateScript } from "./state-copy.ts";
import { storageLimitFor } from "./storage-limits.ts";
import { pinnedGatewayImage } from "./update-image-version.ts";

// update-image: the container recreated on the tag's newest build, keeping the volume; the
// previous image (by id) and a snapshot of the state come back when the new one fails.

/** Copies the state volume into `<volume>-prev` (replacing an older snapshot), or back. */
export async function snapshotVolume(
  row: InstanceRow,
  image: string,
  direction: "save" | "restore",
): Promise<void> {
  const snapshot = `${row.volume_name}-prev`;
  // At the user's limit: the copy of a state up to that limit fits (decision 0216).
  await rt().ensureVolume(snapshot, volumeLabels(row), {
    limits: limitsForPlan(row.plan),
    storageLimitBytes: await storageLimitFor(row),
  });
  const [from, to] = direction === "save" ? ["/state", "/snapshot"] : ["/snapshot", "/state"];
  const copied = await rt().runOnce({
    image,
    volume: row.volume_name,
    volumeTarget: "/state",
    extraVolumes: { [snapshot]: "/snapshot" },
    entrypoint: ["sh", "-c"],
    // As root with only the capabilities a faithful copy needs (owners and modes kept); a new
    // snapshot volume's root is root-owned. No network, removed at once.
    user: "0",
    capAdd: ["CHOWN", "DAC_OVERRIDE", "FOWNER"],
    // The nested subvolumes of both (the agent's workspace and its limit group) are kept.
    cmd: [copyStateScript(from, to)],
    labels: ownerLabels(row.id),
    timeoutMs: 300_000,
  });
  if (copied.exitCode !== 0) {
    throw new Error(`volume ${direction} failed: ${copied.stderr.slice(0, 500)}`);
  }
}

/** What the instance ran before the update: its tag and, when known, the image id. */
interface Previous {
  tag: string;
  id: string | undefined;
  /** The id, else the tag: the image the snapshot is copied with and rolled back to. */
  image: string;
}

/** The previous image and the state snapshot back; the reason recorded. */
async function rollBack(row: InstanceRow, previous: Previous, reason: string) {
  const failed = await rt().inspect(row.container_name);
  if (isUp(failed)) await rt().stop(failed.id, 10);
  await snapshotVolume(row, previous.image, "restore");
  const info = await ensureContainer(row, {
    image: previous.tag,
    imageId: previous.id,
    recreate: true,
  });
  await waitReady(info).catch(() => {});
  await observe((await getInstance(row.id)) as InstanceRow);
  await recordError(
    row.id,
    `${reason}; rolled back to ${previous.tag} (${previous.image}) and the state snapshot`,
  );
  return { rolledBack: previous.tag, imageId: previous.id, reason };
}

/**
 * A backup of every agent before the update (decision 0140). When it cannot be taken the update
 * does not start: the gateway comes back as it was and why is recorded.
 */
async function backUpBeforeUpdate(row: InstanceRow, previous: Previous, target: string) {
  try {
    await backupInstanceAgents(row, "pre-update", previous.image);
    return true;
  } catch (error) {
    const reason = `update to ${target} not started: the pre-update backup failed: ${(error as Error).message}`;
    const info = await ensureContainer(row, { image: previous.tag, imageId: previous.id });
    await waitReady(info).catch(() => {});
    await observe((await getInstance(row.id)) as InstanceRow);
    await recordError(row.id, reason);
    return { failed: reason };
  }
}

/** The container recreated on `target`, healthy, observed: the update's progress steps. */
async function updateTo(
  row: InstanceRow,
  target: string,
  targetId: string,
  previous: Previous,
  run: RunProgress,
) {
  const info = await ensureContainer(row, { image: target, recreate: true });
  await run.step("container-created");
  await waitReady(info);
  await run.step("gateway-healthy");
  await observe((await getInstance(row.id)) as InstanceRow);
  await run.step("ready");
  return { updated: target, imageId: targetId, from: previous.image };
}

/**
 * Recreates the container on the newest build of the configured image tag, keeping the volume.
 * Images are compared by id, so a tag rebuilt in place (new plugins, a new base) is an update
 * too. The state is snapshotted first (the gateway stopped, so the copy is consistent); when the
 * new gateway is not healthy within the bound, the previous image — by id, since its tag may
 * now name the new build — and the snapshot come back, and why is recorded.
 */
export async function updateImage(instanceId: string) {
  return withInstanceLock(instanceId, async () => {
    const row = await getInstance(instanceId);
    if (!row) return { skipped: "no such instance" };
    const target = await pinnedGatewayImage();
    const blocked = blockedReason(await gatewayVersionPolicy(), target);
    if (blocked) {
      const reason = `update to ${target} refused: ${blocked}`;
      await recordError(row.id, reason);
      return { failed: reason };
    }
    const targetId = await rt().imageId(target);
    if (!targetId) {
      // Nothing is stopped or touched for an image that is not there.
      const reason = `update to ${target} failed: the image is not built`;
      await recordError(row.id, reason);
      return { failed: reason };
    }
    const current = await rt().inspect(row.container_name);
    if (current?.running && current.imageId === targetId) return { unchanged: target };
    const previousId = current?.imageId ?? row.image_id ?? undefined;
    const previousTag = row.image ?? target;
    const previous = { tag: previousTag, id: previousId, image: previousId ?? previousTag };
    await updateInstance(row.id, { observed_state: "updating", desired_state: "running" });
    const run = await startRun(row.id, "update");
    if (isUp(current)) await rt().stop(current.id, 10); // releases the state lease
    await snapshotVolume(row, previous.image, "save");
    const backedUp = await backUpBeforeUpdate(row, previous, target).catch(async (error) => {
      await run.fail();
      throw error;
    });
    if (backedUp !== true) {
      await run.fail();
      return backedUp;
    }
    try {
      return await updateTo(row, target, targetId, previous, run);
    } catch (error) {
      await run.fail();
      log().warn({ instanceId, err: error }, "update-image failed; rolling back");
      return rollBack(row, previous, `update to ${target} failed: ${(error as Error).message}`);
    }
  });
}
