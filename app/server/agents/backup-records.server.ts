import type { Sql, TransactionSql } from "postgres";
import { z } from "zod";
import { unseal } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";
import { newId } from "../platform/ids.server.ts";

// The platform's records of an agent as a backup holds them (records.json): its configuration,
// its messages, the session chat continues, and its user's channel credentials — sealed as they
// are at rest, so a backup never carries a readable bot token.

export const RECORDS_VERSION = 1;

const iso = z.union([z.string(), z.date()]).transform((v) => new Date(v));

export const agentRecordsSchema = z.object({
  version: z.literal(RECORDS_VERSION),
  agent: z.object({
    id: z.string(),
    name: z.string().min(1).max(100),
    gateway_agent_id: z.string(),
    model: z.string(),
    tier: z.string(),
    config: z.record(z.string(), z.unknown()),
  }),
  activeSession: z.string().nullable(),
  channels: z.array(
    z.object({
      channel: z.enum(["chatapp1", "chatapp2", "chatapp3"]),
      sealed: z.string(),
      details: z.record(z.string(), z.unknown()),
    }),
  ),
  messages: z.array(
    z.object({
      id: z.string(),
      sender: z.enum(["user", "agent"]),
      content: z.string(),
      platform: z.enum(["web", "chatapp1", "chatapp2", "chatapp3"]),
      session_key: z.string(),
      dedupe_key: z.string(),
      created_at: iso,
    }),
  ),
});
export type AgentRecords = z.infer<typeof agentRecordsSchema>;

const opens = (sealed: string) => {
  try {
    unseal(sealed);
    return true;
  } catch {
    return false;
  }
};

/** What a backup records of the agent now. */
export async function readAgentRecords(
  agentId: string,
  sql: Sql | TransactionSql = db(),
): Promise<AgentRecords> {
  const [agent] = await sql<AgentRecords["agent"][]>`
    select id, name, gateway_agent_id, model, tier, config from agents where id = ${agentId}`;
  if (!agent) throw new Error(`agent ${agentId} is gone`);
  const [[active], channels, messages] = await Promise.all([
    sql<{ session_key: string }[]>`
      select session_key from agent_active_sessions where agent_id = ${agentId}`,
    sql<AgentRecords["channels"]>`
      select c.channel, c.sealed, c.details from channel_credentials c
      join agents a on a.user_id = c.user_id where a.id = ${agentId} order by c.channel`,
    sql<AgentRecords["messages"]>`
      select id, sender, content, platform, session_key, dedupe_key, created_at
      from agent_messages where agent_id = ${agentId} order by created_at, id`,
  ]);
  return {
    version: RECORDS_VERSION,
    agent,
    activeSession: active?.session_key ?? null,
    channels,
    messages,
  };
}

/**
 * Puts the records back on the agent: its name, model and configuration (a new revision, so the
 * worker writes it into the gateway), the messages it had (those recorded since are kept), the
 * active session, and — its own records only, not another agent's — the channel credentials as
 * they were sealed.
 */
export async function writeAgentRecords(
  agentId: string,
  userId: string,
  records: AgentRecords,
  tx: TransactionSql,
): Promise<void> {
  await tx`
    update agents set name = ${records.agent.name}, model = ${records.agent.model},
      config = ${tx.json(records.agent.config as never)}, config_revision = config_revision + 1,
      updated_at = now()
    where id = ${agentId} and user_id = ${userId}`;
  // Another agent's records (an import): its message ids are not ours to reuse.
  const foreign = records.agent.id !== agentId;
  for (const m of records.messages) {
    await tx`
      insert into agent_messages (id, agent_id, user_id, sender, content, platform, session_key,
        dedupe_key, created_at)
      values (${foreign ? newId("msg") : m.id}, ${agentId}, ${userId}, ${m.sender}, ${m.content}, ${m.platform},
        ${m.session_key}, ${m.dedupe_key}, ${m.created_at})
      on conflict do nothing`;
  }
  if (records.activeSession) {
    await tx`
      insert into agent_active_sessions (agent_id, user_id, session_key)
      values (${agentId}, ${userId}, ${records.activeSession})
      on conflict (agent_id) do update set session_key = excluded.session_key, updated_at = now()`;
  }
  // Another agent's records (an import) bring no channel credentials (decision 0200): an export
  // leaves them out, and these are not trusted to have.
  if (foreign) return;
  for (const c of records.channels) {
    // Sealed under another installation's key: unusable here, the user enters it again.
    if (!opens(c.sealed)) continue;
    await tx`
      insert into channel_credentials (user_id, channel, sealed, details)
      values (${userId}, ${c.channel}, ${c.sealed}, ${tx.json(c.details as never)})
      on conflict (user_id, channel) do update
        set sealed = excluded.sealed, details = excluded.details, updated_at = now()`;
  }
}
