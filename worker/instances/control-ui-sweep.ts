import { sweepControlUiDevices } from "../../app/server/agents/control-ui-device.server.ts";
import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { log } from "./engine.ts";
import { connectPaired } from "./pairing.ts";

// The periodic pass over running gateways that removes Control UI devices whose socket is gone
// with the web process that held it (decision 0170): the ingress removes a socket's device when
// the socket closes, which a killed web process never does.

/** Sweeps every running, paired gateway; returns the devices removed per instance. */
export async function sweepAllControlUiDevices(now = Date.now()) {
  const rows = await db()<InstanceRow[]>`
    select * from instances
    where observed_state = 'running' and gateway_address is not null and paired_at is not null`;
  const removed: Record<string, string[] | string> = {};
  for (const row of rows) {
    try {
      const { client } = await connectPaired(row, row.gateway_address as string);
      try {
        const gone = await sweepControlUiDevices(client, now);
        if (gone.length) {
          removed[row.id] = gone;
          log().info({ instanceId: row.id, devices: gone }, "orphaned Control UI devices removed");
        }
      } finally {
        client.close();
      }
    } catch (error) {
      // A gateway that does not answer now is swept on a later pass.
      removed[row.id] = `error: ${(error as Error).message}`;
    }
  }
  return removed;
}
