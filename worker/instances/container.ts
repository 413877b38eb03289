import {
  gatewayTokenOf,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import {
  type ContainerInfo,
  isClusterRuntime,
  limitsForPlan,
  StaleTaskError,
} from "../runtime/index.ts";
import { weighForBoot } from "./boot-weight.ts";
import {
  ensureGatewayNetwork,
  ensureNetwork,
  gatewayAddress,
  isUp,
  log,
  ownerLabels,
  rt,
  STATE_DIR,
  volumeLabels,
} from "./engine.ts";
import { writeInitialConfig } from "./gateway-config.ts";
import { storageLimitFor } from "./storage-limits.ts";
import { sweepAtStart } from "./tmp-sweep.ts";
import { pinnedGatewayImage, refuseBlockedImage } from "./update-image-version.ts";

// An instance's container: created when missing (its volume and first config with it) and
// started, on the image the instance is pinned to (decision 0089).

interface ContainerOptions {
  /** The tag to move to (update); otherwise the instance stays on its pinned image id. */
  image?: string;
  /** An image id to pin again (rollback). */
  imageId?: string;
  /** Remove and create the container even when it exists (repair, update). */
  recreate?: boolean;
}

/**
 * The image to create from: by tag while the tag still names the pinned id (readable in
 * `docker ps`), else by id; a pinned id that is gone (pruned by an operator) falls back to the
 * tag. `wantedId` is the id a container must run to be kept.
 */
async function imageFor(row: InstanceRow, options: ContainerOptions) {
  const chosen = options.image ?? row.image;
  // A new gateway gets the pinned build, never a blocked one (decision 0161).
  const tag = chosen ?? (await pinnedGatewayImage());
  if (!chosen) await refuseBlockedImage(tag);
  const pin = options.imageId ?? (options.image ? undefined : row.image_id);
  const tagId = await rt().imageId(tag);
  const pinned = pin && pin !== tagId ? await rt().imageId(pin) : undefined;
  return { tag, image: pinned ?? tag, wantedId: pinned ?? tagId };
}

/**
 * A gateway's restart policy (decision 0241). One engine host: `no`. The engine's `on-failure`
 * started a crashed gateway again at once, outside any boot slot, on the CPU that had starved
 * its boot (the soak's death spiral, 0238); a crash is now restarted by reconcile, in its line
 * and with its backoff, noticed by the sampler's next pass (crash-watch.ts). Swarm keeps
 * `on-failure`: a task ended under Condition `none` stays ended, and the driver's start of a
 * service already at one replica does not replace it, so nothing would bring it back.
 */
export function gatewayRestartPolicy(): "no" | "on-failure" {
  return isClusterRuntime(rt()) ? "on-failure" : "no";
}

/**
 * A gateway made before decision 0241 (with `on-failure`) gets the policy of a new one, in
 * place: the engine applies it without a restart. Returns whether it changed.
 */
export async function alignRestartPolicy(info: ContainerInfo): Promise<boolean> {
  const runtime = rt();
  const wanted = gatewayRestartPolicy();
  if (!runtime.setRestartPolicy || info.restartPolicy === wanted) return false;
  await runtime.setRestartPolicy(info.id, wanted);
  return true;
}

async function createContainer(row: InstanceRow, image: string): Promise<string> {
  const network = await ensureGatewayNetwork(row.container_name, row.id);
  return rt().create({
    instanceId: row.id,
    userId: row.user_id,
    image,
    name: row.container_name,
    hostname: row.container_name,
    volume: row.volume_name,
    volumeTarget: STATE_DIR,
    network,
    limits: limitsForPlan(row.plan),
    env: { OPENCLAW_GATEWAY_TOKEN: gatewayTokenOf(row) },
    labels: ownerLabels(row.id),
    restartPolicy: gatewayRestartPolicy(),
  });
}

/**
 * A volume whose agent subvolumes an update's copy flattened (before decision 0227) gets them
 * back, before its gateway starts: only a created or stopped container's (a paused one holds
 * its files open, a restarting one the engine may start meanwhile), under the instance's lock
 * as every start is. A failed repair leaves the volume as it was and the gateway starts on it.
 */
export async function repairBeforeStart(
  row: Pick<InstanceRow, "id" | "volume_name">,
  info: ContainerInfo,
): Promise<string[]> {
  if (info.state !== "created" && info.state !== "exited") return [];
  try {
    const repaired = (await rt().repairVolumeLayout?.(row.volume_name)) ?? [];
    if (repaired.length) log().info({ instanceId: row.id, repaired }, "volume layout repaired");
    return repaired;
  } catch (error) {
    log().warn({ instanceId: row.id, err: error }, "volume layout repair failed; starting as is");
    return [];
  }
}

/**
 * Starts the container; one the engine will not start because it kept the task of its earlier
 * run (after an engine restart, decision 0239) is made again on the same volume and started.
 */
async function startOrRecreate(
  row: InstanceRow,
  info: ContainerInfo,
  image: string,
  gatewayIp: string | undefined,
): Promise<ContainerInfo> {
  try {
    await weighForBoot(row, info.id);
    await rt().start(info.id);
    return (await rt().inspect(info.id)) ?? info;
  } catch (error) {
    if (!(error instanceof StaleTaskError)) throw error;
    log().warn(
      { err: error, instanceId: row.id },
      "recreating a container the engine cannot start",
    );
    await rt().remove(info.id);
    await writeInitialConfig(row, image, gatewayIp);
    const fresh = await rt().inspect(await createContainer(row, image));
    if (!fresh) throw new Error("container vanished after create");
    await weighForBoot(row, fresh.id);
    await rt().start(fresh.id);
    return (await rt().inspect(fresh.id)) ?? fresh;
  }
}

/**
 * Creates (when missing) and starts the container; returns its inspect data. An instance stays
 * on the image id it runs (`image_id`) even when its tag is rebuilt (gateway/build.sh keeps the
 * tag, the OpenClaw version): start, restart, repair and a healed crash never change the
 * gateway under a tenant; only `update` moves it (`image` names the tag to move to), and a
 * rollback pins the previous id again (`imageId`).
 */
export async function ensureContainer(
  row: InstanceRow,
  options: ContainerOptions = {},
): Promise<ContainerInfo> {
  const { tag, image, wantedId } = await imageFor(row, options);
  const { gatewayIp } = await ensureNetwork();
  // A new instance's node is chosen with its volume (multi-node drivers: by free capacity).
  await rt().ensureVolume(row.volume_name, volumeLabels(row), {
    limits: limitsForPlan(row.plan),
    storageLimitBytes: await storageLimitFor(row), // where the driver limits storage (0216)
  });
  let info = await rt().inspect(row.container_name);
  if (info && (options.recreate || (wantedId !== undefined && info.imageId !== wantedId))) {
    // Graceful stop first: the gateway releases its state lease (gateway/README.md).
    if (isUp(info)) await rt().stop(info.id, 10);
    await rt().remove(info.id);
    info = undefined;
  }
  if (!info) {
    await writeInitialConfig(row, image, gatewayIp);
    info = await rt().inspect(await createContainer(row, image));
  }
  if (!info) throw new Error("container vanished after create");
  if (!info.running) {
    await repairBeforeStart(row, info); // decision 0235
    info = await startOrRecreate(row, info, image, gatewayIp);
    sweepAtStart(row); // earlier runs' temporary leftovers (decision 0224), in the background
  }
  await updateInstance(row.id, {
    driver: rt().driver,
    container_id: info.id,
    image: tag,
    image_id: info.imageId,
    gateway_address: gatewayAddress(info) ?? null,
    started_at: info.startedAt ? new Date(info.startedAt) : null,
    observed_state: "starting",
    observed_at: new Date(),
  });
  return info;
}
