import { sweepControlUiDevices } from "../../app/server/agents/control-ui-device.server.ts";
import { getInstance } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { log } from "./engine.ts";
import { tryInstanceLock } from "./lock.ts";
import { connectPaired } from "./pairing.ts";

// The periodic pass over running gateways that removes Control UI devices whose socket is gone
// with the web process that held it (decision 0170): the ingress removes a socket's device when
// the socket closes, which a killed web process never does.

/**
 * Sweeps every running, paired gateway that nothing else is working on (an instance whose lock
 * is held, by a provisioning, restore or lifecycle action, waits for the next pass: pairing
 * against a gateway that is being replaced would race with it). Returns the devices removed per
 * instance, and the instances that could not be swept.
 */
export async function sweepAllControlUiDevices(now = Date.now()) {
  const ids = await db()<{ id: string }[]>`
    select id from instances
    where observed_state = 'running' and gateway_address is not null and paired_at is not null`;
  const removed: Record<string, string[] | string> = {};
  for (const { id } of ids) {
    try {
      const gone = await tryInstanceLock(id, async () => {
        const row = await getInstance(id);
        if (row?.observed_state !== "running" || !row.gateway_address || !row.paired_at) return [];
        const { client } = await connectPaired(row, row.gateway_address);
        try {
          return await sweepControlUiDevices(client, now);
        } finally {
          client.close();
        }
      });
      if (gone?.length) {
        removed[id] = gone;
        log().info({ instanceId: id, devices: gone }, "orphaned Control UI devices removed");
      }
    } catch (error) {
      // A gateway that does not answer now is swept on a later pass.
      removed[id] = `error: ${(error as Error).message}`;
    }
  }
  return removed;
}
