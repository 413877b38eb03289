import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { cloneAgentState } from "../instances/clone.ts";

/** Copies an agent's gateway state into its clone (decision 0162). */
export async function cloneAgentJob(payload: JobPayload<"clone-agent">) {
  return cloneAgentState(payload.userId, payload.sourceAgentId, payload.agentId);
}
