import { z } from "zod";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { json } from "../platform/http.server.ts";
import { newId } from "../platform/ids.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { agentSummary } from "./agent-views.server.ts";
import { type AgentRow, createAgentRecord, getOwnedAgent } from "./agents.server.ts";
import { awaitJob, getInstanceByUser } from "./instances.server.ts";

// POST /api/agents/:id/clone (decision 0162): a new agent of the same user, counted against the
// tier limit like a provisioned one (429 when full), with the source's name, model, tier and
// configuration, its messages (session keys moved to the clone's), and its gateway workspace
// (memory, bootstrap files, workspace skills) copied by the worker. A clone whose state could
// not be copied is removed again: 409 with why, nothing left behind.

export const cloneBodySchema = z
  .object({
    name: z
      .string()
      .trim()
      .min(1, "name must not be blank")
      .max(100, "name must be at most 100 characters")
      .optional(),
  })
  .strict()
  // The body is optional: an empty POST clones under the default name.
  .default({});
export type CloneBody = z.infer<typeof cloneBodySchema>;

const cloneOutcome = z.object({ ok: z.boolean(), error: z.string().optional() });

/** The default name: the source's, marked as a copy, within the 100-character limit. */
export const cloneName = (name: string) => `${name.slice(0, 100 - " (copy)".length)} (copy)`;

/** The source's messages and active session, under the clone's gateway agent id. */
async function copyRecords(source: AgentRow, clone: AgentRow) {
  const from = `agent:${source.gateway_agent_id}:`;
  const to = `agent:${clone.gateway_agent_id}:`;
  const moved = (key: string) => (key.startsWith(from) ? to + key.slice(from.length) : key);
  await db().begin(async (tx) => {
    const messages = await tx<
      {
        sender: string;
        content: string;
        platform: string;
        session_key: string;
        dedupe_key: string;
        created_at: Date;
      }[]
    >`select sender, content, platform, session_key, dedupe_key, created_at
      from agent_messages where agent_id = ${source.id} order by created_at, id`;
    for (const m of messages) {
      await tx`
        insert into agent_messages (id, agent_id, user_id, sender, content, platform, session_key,
          dedupe_key, created_at)
        values (${newId("msg")}, ${clone.id}, ${clone.user_id}, ${m.sender}, ${m.content},
          ${m.platform}, ${moved(m.session_key)}, ${m.dedupe_key}, ${m.created_at})
        on conflict do nothing`;
    }
    const [active] = await tx<{ session_key: string }[]>`
      select session_key from agent_active_sessions where agent_id = ${source.id}`;
    if (active) {
      await tx`
        insert into agent_active_sessions (agent_id, user_id, session_key)
        values (${clone.id}, ${clone.user_id}, ${moved(active.session_key)})
        on conflict (agent_id) do nothing`;
    }
  });
}

/** Removes a clone whose state could not be copied (its rows cascade). */
async function removeClone(clone: AgentRow) {
  await db()`delete from agents where id = ${clone.id} and user_id = ${clone.user_id}`;
  await sendJob("sync-agents", { userId: clone.user_id }).catch(() => undefined);
}

/**
 * Clones the agent; `cloned` when the workspace is copied, `copying` when the copy still runs
 * after BACKUP_RESTORE_WAIT_MS (the clone exists and is listed; its workspace follows).
 */
export async function cloneAgentFor(userId: string, sourceId: string, body: CloneBody) {
  const source = await getOwnedAgent(userId, sourceId);
  const instance = await getInstanceByUser(userId);
  if (!instance?.container_id) {
    throw new DomainError(409, "The agent has no instance yet: nothing to clone");
  }
  const clone = await createAgentRecord(userId, {
    name: body.name ?? cloneName(source.name),
    model: source.model,
    tier: source.tier,
    config: source.config,
  });
  try {
    await copyRecords(source, clone);
    const jobId = await sendJob("clone-agent", {
      userId,
      sourceAgentId: source.id,
      agentId: clone.id,
    });
    const done = await awaitJob("clone-agent", jobId, env().BACKUP_RESTORE_WAIT_MS);
    const agent = { ...agentSummary(clone, instance), clonedFrom: source.id };
    if (!done) return { success: true, agent, status: "copying" as const };
    const outcome = cloneOutcome.safeParse(done.output);
    if (done.state !== "completed" || !outcome.success || !outcome.data.ok) {
      const why = (outcome.success && outcome.data.error) || "the worker did not finish";
      throw new DomainError(409, `Clone failed, no agent was created: ${why}`);
    }
    return { success: true, agent, status: "cloned" as const };
  } catch (error) {
    await removeClone(clone);
    throw error;
  }
}

/** POST /api/agents/:id/clone: 201 when cloned, 202 while the workspace is still copying. */
export async function cloneAgent(userId: string, sourceId: string, body: CloneBody) {
  const result = await cloneAgentFor(userId, sourceId, body);
  return json(result, { status: result.status === "cloned" ? 201 : 202 });
}
