import { recordAudit } from "../platform/audit.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { commandJob, failedJobs, jobCounts } from "../platform/jobs.server.ts";

// The console's job queues: counts per state, failed jobs with their error, retry and cancel.

export async function opsQueues() {
  const [counts, failed] = await Promise.all([jobCounts(), failedJobs()]);
  return { counts, failed };
}

export async function opsJobCommand(command: "retry" | "cancel", name: string, id: string) {
  const done = await commandJob(command, name, id);
  if (!done)
    throw new DomainError(
      409,
      `No ${name} job ${id} that can be ${command === "retry" ? "retried" : "cancelled"}`,
    );
  await recordAudit({
    action: command === "retry" ? "job.retried" : "job.cancelled",
    userId: null,
    target: id,
    details: { queue: name },
  });
  return { done };
}
