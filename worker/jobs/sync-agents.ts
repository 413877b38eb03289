import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { syncAgents } from "../instances/agents-sync.ts";

/** Writes all of the user's agents into their gateway's config (idempotent). */
export async function syncAgentsJob(payload: JobPayload<"sync-agents">) {
  return syncAgents(payload.userId);
}
