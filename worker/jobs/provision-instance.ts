import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { provision } from "../instances.ts";

/** Volume, config (the platform's AI endpoint as model provider), container, pairing, healthy. */
export async function provisionInstance(payload: JobPayload<"provision-instance">) {
  return provision(payload.instanceId);
}
