import type { GatewayClient } from "../openclaw/client.server.ts";
import { GatewayRequestError, GatewayUnavailableError } from "../openclaw/errors.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import {
  type AgentRow,
  FIRST_GATEWAY_AGENT_ID,
  getOwnedAgent,
  listAgents,
} from "./agents.server.ts";
import { readHistory } from "./history.server.ts";
import { withGateway } from "./instance-gateway.server.ts";
import type { InstanceRow } from "./instances.server.ts";

// An agent's chat sessions, as its gateway keeps them (GET /api/agent?action=sessions|session|
// memory, the chat page): the target agent, its session keys, their history. The chat turns
// themselves are in talk.server.ts. docs/decisions/0080-agent-interaction.md

/** Memory view: the last 10 messages, each cut to 100 characters (contract "Limits"). */
export const MEMORY_MESSAGES = 10;
export const MEMORY_CHARS = 100;

export interface Target {
  agent: AgentRow | undefined;
  gatewayAgentId: string;
}

/**
 * The agent the user talks to: the named one (404 when not theirs; the chat page), else their
 * first agent, or the gateway's `main` before they have one (the API).
 */
export async function targetOf(userId: string, agentId?: string): Promise<Target> {
  const agent = agentId ? await getOwnedAgent(userId, agentId) : (await listAgents(userId))[0];
  return { agent, gatewayAgentId: agent?.gateway_agent_id ?? FIRST_GATEWAY_AGENT_ID };
}

const sessionPrefix = (target: Target) => `agent:${target.gatewayAgentId}:`;
const sessionNotFound = () => new DomainError(404, "Session not found");

/** Only the target agent's session keys are addressable; anything else is "not found". */
export function ownKey(target: Target, sessionId: string): string {
  if (!sessionId.startsWith(sessionPrefix(target)) || sessionId.length > 300) {
    throw sessionNotFound();
  }
  return sessionId;
}

// --- gateway shapes (OpenClaw 2026.9: sessions.list rows, chat.history messages) ------------

interface GatewaySessionRow {
  key: string;
  agentId?: string;
  createdAt?: number;
  updatedAt?: number;
  lastInteractionAt?: number;
  archived?: boolean;
}

interface GatewayMessage {
  role: string;
  content: unknown;
  timestamp?: number;
  __openclaw?: { id?: string; seq?: number };
}

/** The text of a gateway message: a string, or the text parts of a content array. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) =>
        part && typeof part === "object" && (part as { type?: string }).type === "text"
          ? String((part as { text?: unknown }).text ?? "")
          : "",
      )
      .join("");
  }
  return "";
}

/** User and assistant turns with text (tool calls and system rows are not conversation). */
export function conversation(messages: GatewayMessage[]) {
  return messages
    .filter((m) => (m.role === "user" || m.role === "assistant") && contentText(m.content) !== "")
    .map((m) => ({
      id: m.__openclaw?.id ?? `seq-${m.__openclaw?.seq ?? 0}`,
      role: m.role as "user" | "assistant",
      content: contentText(m.content),
      timestamp: m.timestamp ?? 0,
    }));
}

export async function history(client: GatewayClient, key: string): Promise<GatewayMessage[]> {
  return (await readHistory(client, key)) as GatewayMessage[];
}

// Session keys this process has seen the gateway know (created or described), so a chat turn in
// a known session skips one round trip. A key expires after a while in case it was deleted.
const KNOWN_TTL_MS = 5 * 60_000;
const known = new Map<string, number>();
const remember = (instanceId: string, key: string) => {
  if (known.size > 10_000) known.clear();
  known.set(`${instanceId}|${key}`, Date.now() + KNOWN_TTL_MS);
};
const isKnown = (instanceId: string, key: string) =>
  (known.get(`${instanceId}|${key}`) ?? 0) > Date.now();

/** The gateway's row of one session, or undefined when the gateway does not know the key. */
async function describeSession(
  client: GatewayClient,
  key: string,
): Promise<GatewaySessionRow | undefined> {
  try {
    const result = await client.request<{ session?: GatewaySessionRow | null }>(
      "sessions.describe",
      { key },
    );
    return result.session ?? undefined;
  } catch (error) {
    // An unknown key is a request error; an unreachable gateway stays a 502.
    if (error instanceof GatewayRequestError) return undefined;
    throw error;
  }
}

// --- sessions -----------------------------------------------------------------------------------

async function messageCounts(agent: AgentRow | undefined): Promise<Map<string, number>> {
  if (!agent) return new Map();
  const rows = await db()<{ session_key: string; n: number }[]>`
    select session_key, count(*)::int as n from agent_messages
    where agent_id = ${agent.id} group by session_key`;
  return new Map(rows.map((r) => [r.session_key, r.n]));
}

function sessionView(row: GatewaySessionRow, count: number) {
  const createdAt = row.createdAt ?? row.updatedAt ?? 0;
  return {
    id: row.key,
    status: "active" as const,
    messageCount: count,
    createdAt,
    lastActivity: Math.max(row.lastInteractionAt ?? 0, row.updatedAt ?? 0, createdAt),
  };
}

export async function listSessions(userId: string, agentId?: string) {
  const target = await targetOf(userId, agentId);
  const rows = await withGateway(userId, async (client) => {
    const result = await client.request<{ sessions?: GatewaySessionRow[] }>("sessions.list", {
      agentId: target.gatewayAgentId,
      limit: 100,
    });
    return (result.sessions ?? []).filter(
      (s) => s.key.startsWith(sessionPrefix(target)) && !s.archived,
    );
  });
  const counts = await messageCounts(target.agent);
  return { sessions: rows.map((row) => sessionView(row, counts.get(row.key) ?? 0)) };
}

/** A full session with its messages; 404 when the gateway does not know it. */
export async function getSession(userId: string, sessionId: string, agentId?: string) {
  const target = await targetOf(userId, agentId);
  const key = ownKey(target, sessionId);
  return withGateway(userId, async (client) => {
    const row = await describeSession(client, key);
    if (!row) throw sessionNotFound();
    const messages = conversation(await history(client, key));
    return { ...sessionView(row, messages.length), messages };
  });
}

async function createGatewaySession(client: GatewayClient, target: Target): Promise<string> {
  const created = await client.request<{ key?: string }>("sessions.create", {
    agentId: target.gatewayAgentId,
  });
  if (!created.key) throw new GatewayUnavailableError("sessions.create returned no key");
  return created.key;
}

export async function setActiveSession(userId: string, target: Target, key: string): Promise<void> {
  if (!target.agent) return;
  await db()`insert into agent_active_sessions (agent_id, user_id, session_key)
    values (${target.agent.id}, ${userId}, ${key})
    on conflict (agent_id) do update set session_key = excluded.session_key, updated_at = now()`;
}

async function activeSessionKey(target: Target): Promise<string | undefined> {
  if (!target.agent) return undefined;
  const [row] = await db()<{ session_key: string }[]>`
    select session_key from agent_active_sessions where agent_id = ${target.agent.id}`;
  return row?.session_key;
}

/** The session chat continues for this agent, if any (the chat page opens it by default). */
export async function activeSessionId(userId: string, agentId?: string) {
  return activeSessionKey(await targetOf(userId, agentId));
}

/** A new gateway session, which becomes the active one. */
export async function createSession(userId: string, agentId?: string) {
  const target = await targetOf(userId, agentId);
  const key = await withGateway(userId, async (client, instance) => {
    const created = await createGatewaySession(client, target);
    remember(instance.id, created);
    return created;
  });
  await setActiveSession(userId, target, key);
  return { sessionId: key, status: "active" as const };
}

/** The key chat continues: the named session (404 unknown), the active one, or a new one. */
export async function resolveChatSession(
  client: GatewayClient,
  instance: InstanceRow,
  target: Target,
  sessionId: string | undefined,
): Promise<string> {
  const exists = async (key: string) => {
    if (isKnown(instance.id, key)) return true;
    if (!(await describeSession(client, key))) return false;
    remember(instance.id, key);
    return true;
  };
  if (sessionId) {
    const key = ownKey(target, sessionId);
    if (!(await exists(key))) throw sessionNotFound();
    return key;
  }
  const active = await activeSessionKey(target);
  if (active && (await exists(active))) return active;
  const created = await createGatewaySession(client, target);
  remember(instance.id, created);
  return created;
}

const truncate = (text: string) =>
  text.length > MEMORY_CHARS ? text.slice(0, MEMORY_CHARS) : text;

/** The last 10 messages of the active session, each truncated to 100 characters. */
export async function memory(userId: string, agentId?: string) {
  const target = await targetOf(userId, agentId);
  const key = await activeSessionKey(target);
  if (!key) return { memory: [] };
  return withGateway(userId, async (client) => {
    const turns = conversation(await history(client, key)).slice(-MEMORY_MESSAGES);
    return { memory: turns.map((t) => ({ role: t.role, content: truncate(t.content) })) };
  });
}
