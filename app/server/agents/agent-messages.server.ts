import { z } from "zod";
import { db } from "../platform/db.server.ts";
import { newId } from "../platform/ids.server.ts";
import { limitParam, offsetParam } from "../platform/paging.server.ts";
import { getOwnedAgent } from "./agents.server.ts";

// The platform's record of what agents exchanged, on every surface. Writers (the web's chat
// flows, the worker's gateway-event recorder) pass the gateway's identity of each message as
// `dedupeKey`, so the same history recorded twice adds nothing.

export const PLATFORMS = ["web", "chatapp1", "chatapp2", "chatapp3"] as const;
export type Platform = (typeof PLATFORMS)[number];

/** The surface a gateway session belongs to, from its key (`agent:main:telegram:…`). */
export function platformOfSessionKey(sessionKey: string): Platform {
  const parts = sessionKey.toLowerCase().split(":");
  if (parts.includes("telegram")) return "chatapp1";
  if (parts.includes("discord")) return "chatapp2";
  if (parts.includes("whatsapp")) return "chatapp3";
  return "web";
}

export interface MessageInput {
  sender: "user" | "agent";
  content: string;
  timestamp: Date;
  /** The gateway's identity of the message within the agent (session key + id or position). */
  dedupeKey: string;
}

/** Records messages of one session; returns how many were new. */
export async function recordMessages(
  agent: { id: string; user_id: string },
  sessionKey: string,
  messages: MessageInput[],
  platform: Platform = platformOfSessionKey(sessionKey),
): Promise<number> {
  if (messages.length === 0) return 0;
  const rows = messages.map((m) => ({
    id: newId("msg"),
    agent_id: agent.id,
    user_id: agent.user_id,
    sender: m.sender,
    content: m.content,
    platform,
    session_key: sessionKey,
    dedupe_key: m.dedupeKey,
    created_at: m.timestamp,
  }));
  const inserted = await db()`
    insert into agent_messages ${db()(rows)}
    on conflict (agent_id, dedupe_key) do nothing
    returning id`;
  return inserted.length;
}

export interface AgentMessage {
  id: string;
  agentId: string;
  sender: "user" | "agent";
  content: string;
  timestamp: string;
  platform: Platform;
}

/** A page of the agent's messages, newest first, and the total. */
export async function listMessages(
  agentId: string,
  { limit, offset }: { limit: number; offset: number },
): Promise<{ messages: AgentMessage[]; total: number }> {
  const [rows, [count]] = await Promise.all([
    db()<
      {
        id: string;
        agent_id: string;
        sender: "user" | "agent";
        content: string;
        created_at: Date;
        platform: Platform;
      }[]
    >`select id, agent_id, sender, content, created_at, platform from agent_messages
      where agent_id = ${agentId}
      order by created_at desc, id desc limit ${limit} offset ${offset}`,
    db()<{ total: number }[]>`
      select count(*)::int as total from agent_messages where agent_id = ${agentId}`,
  ]);
  return {
    messages: rows.map((r) => ({
      id: r.id,
      agentId: r.agent_id,
      sender: r.sender,
      content: r.content,
      timestamp: r.created_at.toISOString(),
      platform: r.platform,
    })),
    total: count?.total ?? 0,
  };
}

// --- GET /api/agents/:id/messages ------------------------------------------------------------

export const messagesQuery = z.object({ limit: limitParam(100, 50), offset: offsetParam() });

export async function agentMessages(
  userId: string,
  agentId: string,
  query: { limit: number; offset: number },
) {
  const agent = await getOwnedAgent(userId, agentId);
  const page = await listMessages(agent.id, query);
  return { ...page, limit: query.limit, offset: query.offset, status: "ok" };
}
