import { revokeInstanceTokens } from "../ai/instance-tokens.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { txExecutor } from "../platform/db-helpers.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { deleteChannelCredentials } from "./channels.server.ts";
import type { InstanceRow } from "./instances.server.ts";
import { retireInstance } from "./instances.server.ts";

// DELETE /api/agents/:id (and the agent page's confirmed button). The row goes at once, which
// frees its tier slot. Other agents remaining: the worker drops its entry from the gateway
// (sync-agents). The last agent: the gateway goes too — the instance is retired in the same
// transaction, its channel credentials forgotten, its model-endpoint tokens revoked, and the
// worker removes container and state volume (teardown-instance, by instance id).
// docs/decisions/0103-agent-deletion.md

export interface DeletedAgent {
  success: true;
  id: string;
  /** The instance torn down with the user's last agent, if any. */
  instanceRemoved: boolean;
}

export async function deleteAgent(userId: string, agentId: string): Promise<DeletedAgent> {
  const retired = await db().begin(async (tx) => {
    // The user's row lock orders this against agent creation (which counts under it).
    await tx`select id from users where id = ${userId} for update`;
    const [agent] = await tx<{ id: string; name: string }[]>`
      delete from agents where id = ${agentId} and user_id = ${userId} returning id, name`;
    if (!agent) throw new DomainError(404, "Agent not found");
    const [left] = await tx<{ count: number }[]>`
      select count(*)::int as count from agents where user_id = ${userId}`;
    let instance: InstanceRow | undefined;
    let channels: string[] = [];
    if ((left?.count ?? 0) === 0) {
      [instance] = await tx<InstanceRow[]>`
        select * from instances where user_id = ${userId} for update`;
      if (instance) {
        await retireInstance(tx, instance);
        await sendJob(
          "teardown-instance",
          { userId, instanceId: instance.id },
          { db: txExecutor(tx) },
        );
      }
      channels = await deleteChannelCredentials(userId, tx);
    } else {
      await sendJob("sync-agents", { userId }, { db: txExecutor(tx) });
    }
    await recordAudit(
      {
        action: "agent.deleted",
        userId,
        target: agentId,
        details: {
          name: agent.name,
          instance: instance?.id ?? null,
          channelsRemoved: channels.join(" ") || null,
        },
      },
      tx,
    );
    return instance;
  });
  // At once, not when the worker gets to it: the gateway can no longer spend on the account.
  if (retired) await revokeInstanceTokens(retired.id);
  return { success: true, id: agentId, instanceRemoved: retired !== undefined };
}
