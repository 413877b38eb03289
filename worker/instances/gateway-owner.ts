import { db } from "../../app/server/platform/db.server.ts";

// Whom a gateway serves. Its labels (and its volume's) name the id it was created for, and a
// gateway adopted from the warm pool keeps its pooled id (gwp_…) there: labels cannot change
// under a running container. The instance row that records the container, or the volume, says
// who owns it now.

export type GatewayOwner =
  | { kind: "instance"; instanceId: string }
  | { kind: "pool"; poolId: string; containerName: string }
  /** Nothing records it: the label's id is all there is. */
  | { kind: "unknown"; instanceId: string };

export async function gatewayOwner(ref: {
  /** The instance id its labels carry. */
  labelled: string;
  /** The container (the Swarm driver: the service) id. */
  containerId?: string;
  volume?: string;
}): Promise<GatewayOwner> {
  const containerId = ref.containerId ?? null;
  const volume = ref.volume ?? null;
  const [instance] = await db()<{ id: string }[]>`
    select id from instances
    where container_id = ${containerId} or volume_name = ${volume} or id = ${ref.labelled}
    order by (container_id = ${containerId}) desc nulls last, (volume_name = ${volume}) desc nulls last
    limit 1`;
  if (instance) return { kind: "instance", instanceId: instance.id };
  const [pooled] = await db()<{ id: string; container_name: string }[]>`
    select id, container_name from gateway_pool
    where id = ${ref.labelled} or container_id = ${containerId} limit 1`;
  if (pooled) return { kind: "pool", poolId: pooled.id, containerName: pooled.container_name };
  return { kind: "unknown", instanceId: ref.labelled };
}
