import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { syncAfterProvision } from "../instances/agents-sync.ts";
import { provision } from "../instances/provision.ts";
import type { JobContext } from "./context.ts";

/**
 * Volume, config (the platform's AI endpoint as model provider), container, pairing, healthy;
 * then the user's agents are written into the gateway's config.
 */
export async function provisionInstance(
  payload: JobPayload<"provision-instance">,
  ctx?: JobContext,
) {
  const result = await provision(payload.instanceId, ctx?.signal);
  if (!("skipped" in result)) await syncAfterProvision(payload.instanceId);
  return result;
}
