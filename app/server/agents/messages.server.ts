import { db } from "../platform/db.server.ts";
import { newId } from "../platform/ids.server.ts";

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

// --- figures --------------------------------------------------------------------------------
// One definition of a turn and its figures, for agent stats and the metrics endpoints alike:
// callers compose `turnsQuery` and `turnFigureColumns` with their own grouping.

/** A reply not seen within this long after a user message counts as a failed turn. */
export const REPLY_GRACE_MS = 5 * 60_000;

export interface TurnScope {
  agentId?: string;
  userId?: string;
  /** Only turns whose user message came at or after this. */
  since?: Date;
}

/**
 * The turns of the scope, as a subquery: a turn is a user message; it succeeded when the
 * agent's next message in the same session followed it; its response time is the gap between
 * the two. Columns: agent_id, user_id, created_at, replied_at (null while unanswered).
 */
export function turnsQuery(scope: TurnScope) {
  const sql = db();
  const none = sql``;
  return sql`
    select agent_id, user_id, created_at,
      case when next_sender = 'agent' then next_at end as replied_at
    from (
      select agent_id, user_id, sender, created_at,
        lead(sender) over w as next_sender, lead(created_at) over w as next_at
      from agent_messages
      where true
        ${scope.agentId === undefined ? none : sql`and agent_id = ${scope.agentId}`}
        ${scope.userId === undefined ? none : sql`and user_id = ${scope.userId}`}
        ${scope.since === undefined ? none : sql`and created_at >= ${scope.since}`}
      window w as (partition by agent_id, session_key order by created_at, id)) ordered
    where sender = 'user'`;
}

/** The aggregate columns over rows of `turnsQuery` (read them with `messageFiguresOf`). */
export function turnFigureColumns() {
  return db()`count(*)::int as processed,
    count(*) filter (where created_at > now() - interval '1 hour')::int as last_hour,
    count(replied_at)::int as answered,
    count(*) filter (where replied_at is not null
      or created_at < now() - make_interval(secs => ${REPLY_GRACE_MS / 1000}))::int as judged,
    avg(extract(epoch from (replied_at - created_at)) * 1000)::float8 as avg_ms`;
}

export interface TurnFigureRow {
  processed: number;
  last_hour: number;
  answered: number;
  judged: number;
  avg_ms: number | null;
}

export interface MessageFigures {
  /** Turns (user messages) in the scope. */
  processed: number;
  lastHour: number;
  /** Turns the agent answered. */
  answered: number;
  /** ms, or null when no turn was answered. */
  averageResponseMs: number | null;
  /** percent, or null when no turn can be judged yet. */
  successRate: number | null;
}

export function messageFiguresOf(row: TurnFigureRow | undefined): MessageFigures {
  return {
    processed: row?.processed ?? 0,
    lastHour: row?.last_hour ?? 0,
    answered: row?.answered ?? 0,
    averageResponseMs: row?.avg_ms == null ? null : Math.round(row.avg_ms),
    successRate: row && row.judged > 0 ? (100 * row.answered) / row.judged : null,
  };
}

/** The figures of the scope's turns (agent stats: one agent, all time). */
export async function messageFigures(scope: TurnScope): Promise<MessageFigures> {
  const [row] = await db()<TurnFigureRow[]>`
    select ${turnFigureColumns()} from (${turnsQuery(scope)}) turns`;
  return messageFiguresOf(row);
}
