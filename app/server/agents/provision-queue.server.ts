import { db } from "../platform/db.server.ts";
import { liveJobLine } from "../platform/jobs.server.ts";

// The line of provisions that start a new gateway (decision 0231). A provision that needs a
// gateway the host (or, on Swarm, any node) has no memory for waits in this line instead of
// being started into the OOM killer; the line is the order the provisions were asked for (their
// provision-instance jobs), counting only instances that have no container yet: one that has
// its container (or adopted a pooled one) has left the line. Its job gone (done or given up),
// an instance holds no place. The worker starts only the head of the line, once it fits; the
// web shows the same order: "starting, 2 ahead of you".

export interface ProvisionQueuePlace {
  /** Provisions asked for before this one that have not started their gateway yet. */
  ahead: number;
  requestedAt: Date;
}

/** Where the instance's provision waits, or null when none waits (started, or not asked). */
export async function provisionQueuePlace(instanceId: string): Promise<ProvisionQueuePlace | null> {
  const line = await liveJobLine("provision-instance", "instanceId");
  if (!line.some((entry) => entry.value === instanceId)) return null;
  const waiting = new Set(
    (
      await db()<{ id: string }[]>`
        select id from instances
        where id = any(${line.map((entry) => entry.value)}::text[]) and container_id is null`
    ).map((r) => r.id),
  );
  const inLine = line.filter((entry) => waiting.has(entry.value));
  const index = inLine.findIndex((entry) => entry.value === instanceId);
  const mine = inLine[index];
  return mine ? { ahead: index, requestedAt: mine.createdOn } : null;
}
