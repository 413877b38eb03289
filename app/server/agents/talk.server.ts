import { randomUUID } from "node:crypto";
import { userKeyProviders } from "../ai/byok.server.ts";
import { creditRefusalIn } from "../ai/credit-refusal.server.ts";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { GatewayRequestError, GatewayUnavailableError } from "../openclaw/errors.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { platformVersion } from "../platform/version.server.ts";
import { recordMessages } from "./agent-messages.server.ts";
import {
  type AgentRow,
  FIRST_GATEWAY_AGENT_ID,
  getOwnedAgent,
  listAgents,
} from "./agents.server.ts";
import { channelCredentialFlags } from "./channels.server.ts";
import { type HistoryMessage, messagesOfHistory } from "./history.server.ts";
import { withGateway } from "./instance-gateway.server.ts";
import type { InstanceRow } from "./instances.server.ts";
import { waitWhileStarting } from "./progress.server.ts";
import { touchActivity } from "./sleep.server.ts";
import { wakeIfSleeping } from "./wake.server.ts";

// Talking to a user's agent (GET/POST /api/agent, /api/chat, the live socket): sessions, chat
// turns, memory, skills and health, all from the user's own gateway over the control protocol.
// The chat targets the user's first agent (gateway id `main`); its sessions are the gateway's
// (`agent:main:…`). docs/decisions/0080-agent-interaction.md

/** Version of the agent-interaction API (contract: a semantic version string). */
export const API_VERSION = "1.0.0";
/** Memory view: the last 10 messages, each cut to 100 characters (contract "Limits"). */
export const MEMORY_MESSAGES = 10;
export const MEMORY_CHARS = 100;
/** A first chat after a gateway boot takes ~10 s; a model call can take longer. */
export const CHAT_TIMEOUT_MS = 120_000;
/** How long a skill toggle waits for the gateway's reload to show it. */
const SKILL_SETTLE_MS = 15_000;

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
function ownKey(target: Target, sessionId: string): string {
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
function contentText(content: unknown): string {
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
function conversation(messages: GatewayMessage[]) {
  return messages
    .filter((m) => (m.role === "user" || m.role === "assistant") && contentText(m.content) !== "")
    .map((m) => ({
      id: m.__openclaw?.id ?? `seq-${m.__openclaw?.seq ?? 0}`,
      role: m.role as "user" | "assistant",
      content: contentText(m.content),
      timestamp: m.timestamp ?? 0,
    }));
}

async function history(client: GatewayClient, key: string): Promise<GatewayMessage[]> {
  const result = await client.request<{ messages?: GatewayMessage[] }>("chat.history", {
    sessionKey: key,
    limit: 200,
  });
  return result.messages ?? [];
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

async function setActiveSession(userId: string, target: Target, key: string): Promise<void> {
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
async function resolveChatSession(
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

// --- chat turns ---------------------------------------------------------------------------------

export interface TurnEvents {
  /** Streamed reply text as the gateway produces it (chat `delta` events). */
  onDelta?: (text: string, full: string) => void;
  /** Every gateway event of this run (chat and agent streams), for the live socket. */
  onEvent?: (event: string, payload: unknown) => void;
}

interface ChatEventPayload {
  runId?: string;
  sessionKey?: string;
  state?: string;
  deltaText?: string;
  errorMessage?: string;
  message?: { content?: unknown };
}

/**
 * Sends one message with chat.send and waits for the run's final `chat` event. The listener is
 * registered before the send so no event of the run is missed.
 */
export async function runTurn(
  client: GatewayClient,
  sessionKey: string,
  message: string,
  events: TurnEvents = {},
): Promise<{ runId: string; reply: string }> {
  const runId = randomUUID();
  let full = "";
  let off: () => void = () => {};
  const done = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new GatewayUnavailableError(`chat: no reply within ${CHAT_TIMEOUT_MS} ms`)),
      CHAT_TIMEOUT_MS,
    );
    off = client.onEvent((event, raw) => {
      const payload = (raw ?? {}) as ChatEventPayload;
      if (payload.runId !== runId) return;
      events.onEvent?.(event, raw);
      if (event !== "chat") return;
      if (payload.state === "delta" && typeof payload.deltaText === "string") {
        full += payload.deltaText;
        events.onDelta?.(payload.deltaText, full);
      } else if (payload.state === "final") {
        clearTimeout(timer);
        resolve(contentText(payload.message?.content) || full);
      } else if (payload.state === "error" || payload.state === "aborted") {
        clearTimeout(timer);
        // The platform's own AI endpoint refused the turn (no credits): say so as a 402.
        const refusal = creditRefusalIn(payload.errorMessage);
        if (refusal) return reject(new DomainError(402, refusal));
        reject(
          new GatewayRequestError("chat", {
            code: payload.state.toUpperCase(),
            message: payload.errorMessage ?? `the agent's run ended: ${payload.state}`,
          }),
        );
      }
    });
  });
  try {
    await client.request("chat.send", { sessionKey, message, idempotencyKey: runId });
    return { runId, reply: await done };
  } finally {
    off();
  }
}

/** Records the session's turns in the platform's message store (history.server.ts keys). */
export async function recordSession(
  target: Target,
  client: GatewayClient,
  sessionKey: string,
): Promise<void> {
  if (!target.agent) return;
  // The same mapping (and dedupe keys) as the worker's recorder: a turn both see is stored once.
  const entries = await history(client, sessionKey);
  await recordMessages(
    target.agent,
    sessionKey,
    messagesOfHistory(sessionKey, entries as HistoryMessage[]),
  );
}

const pendingRecords = new Set<Promise<unknown>>();

/** Waits until the chat turns answered so far are recorded (tests, shutdown). */
export async function flushRecords(): Promise<void> {
  await Promise.all([...pendingRecords]);
}

/** One chat turn: the session (named, active or new), the agent's reply, recorded. */
export async function chat(
  userId: string,
  input: { message: string; sessionId?: string; agentId?: string },
  events: TurnEvents = {},
): Promise<{ sessionId: string; reply: string; timestamp: number }> {
  const target = await targetOf(userId, input.agentId);
  // A chat is activity (the agent stays awake) and wakes a sleeping agent (decision 0164).
  await touchActivity(userId);
  await wakeIfSleeping(userId, "chat");
  await waitWhileStarting(userId);
  return withGateway(userId, async (client, instance) => {
    const key = await resolveChatSession(client, instance, target, input.sessionId);
    await setActiveSession(userId, target, key);
    const { reply } = await runTurn(client, key, input.message, events);
    // Recording reads the gateway's history (its message ids are the dedupe keys); the reply
    // does not wait for it. A failure is logged; the next turn records the session again.
    const recorded = recordSession(target, client, key).catch((error: unknown) =>
      logger().warn({ err: error, sessionKey: key }, "recording chat messages failed"),
    );
    pendingRecords.add(recorded);
    void recorded.finally(() => pendingRecords.delete(recorded));
    return { sessionId: key, reply, timestamp: Date.now() };
  });
}

// --- memory, skills, health, credentials --------------------------------------------------------

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

interface GatewaySkill {
  skillKey: string;
  name?: string;
  description?: string;
  emoji?: string;
  disabled?: boolean;
  eligible?: boolean;
  bundled?: boolean;
}

async function gatewaySkills(client: GatewayClient, target: Target): Promise<GatewaySkill[]> {
  const result = await client.request<{ skills?: GatewaySkill[] }>("skills.status", {
    agentId: target.gatewayAgentId,
  });
  return result.skills ?? [];
}

function skillView(s: GatewaySkill) {
  return {
    id: s.skillKey,
    name: s.name ?? s.skillKey,
    description: s.description ?? "",
    emoji: s.emoji ?? null,
    enabled: !s.disabled,
    // Eligible: its requirements (binaries, OS, config) are met inside the instance.
    eligible: s.eligible ?? false,
  };
}

export async function listSkills(userId: string, agentId?: string) {
  const target = await targetOf(userId, agentId);
  return withGateway(userId, async (client) => ({
    skills: (await gatewaySkills(client, target)).map(skillView),
  }));
}

/** Turns a skill on or off in the gateway; 404 for a skill the instance does not have. */
export async function updateSkill(
  userId: string,
  skillId: string,
  enabled: boolean,
  agentId?: string,
) {
  const target = await targetOf(userId, agentId);
  return withGateway(userId, async (client) => {
    const skills = await gatewaySkills(client, target);
    if (!skills.some((s) => s.skillKey === skillId)) {
      throw new DomainError(404, "Skill not found");
    }
    await client.request("skills.update", { skillKey: skillId, enabled });
    // The gateway writes its config file and reloads; wait until its skill list shows the
    // change, so a read right after this answer is consistent.
    const deadline = Date.now() + SKILL_SETTLE_MS;
    for (let delay = 50; Date.now() < deadline; delay = Math.min(delay * 2, 500)) {
      const now = (await gatewaySkills(client, target)).find((s) => s.skillKey === skillId);
      if (now && !now.disabled === enabled) break;
      await new Promise((r) => setTimeout(r, delay));
    }
    return { success: true, skillId, enabled };
  });
}

interface GatewayHealth {
  ok?: boolean;
  channelOrder?: string[];
  channels?: Record<string, unknown>;
}

const CHANNEL_NAMES: Record<string, string> = {
  telegram: "chatapp1",
  discord: "chatapp2",
  whatsapp: "chatapp3",
};

export async function health(userId: string) {
  const target = await targetOf(userId);
  return withGateway(userId, async (client, instance: InstanceRow) => {
    const [h, status, skills] = await Promise.all([
      client.request<GatewayHealth>("health"),
      client.request<{ runtimeVersion?: string; sessions?: { defaults?: { model?: string } } }>(
        "status",
      ),
      gatewaySkills(client, target),
    ]);
    const channels = (h.channelOrder ?? Object.keys(h.channels ?? {})).map(
      (c) => CHANNEL_NAMES[c] ?? c,
    );
    const started = instance.started_at?.getTime();
    return {
      status: h.ok ? "healthy" : "degraded",
      version: status.runtimeVersion ?? client.hello?.server.version ?? instance.gateway_version,
      apiVersion: API_VERSION,
      uptime: started ? Math.max(0, Math.floor((Date.now() - started) / 1000)) : 0,
      model: status.sessions?.defaults?.model ?? target.agent?.model ?? instance.model,
      channels,
      skills: skills.filter((s) => !s.disabled && s.eligible).map((s) => s.skillKey),
      lastSeen: Date.now(),
    };
  });
}

export const PROVIDER_CREDENTIALS = ["openai", "anthropic", "google", "openrouter"] as const;

/** The credential map: true for each provider key and channel token the user configured. */
export async function credentials(userId: string) {
  const [keys, channels] = await Promise.all([
    userKeyProviders(userId),
    channelCredentialFlags(userId),
  ]);
  const have = new Set<string>(keys.map((k) => k.provider));
  return {
    credentials: {
      ...Object.fromEntries(PROVIDER_CREDENTIALS.map((p) => [p, have.has(p)])),
      ...channels,
    } as Record<string, boolean>,
  };
}

/** GET /api/agent without an action: versions and what each action does. */
export function describeApi() {
  return {
    apiVersion: API_VERSION,
    platformVersion,
    endpoints: {
      "GET /api/agent?action=health": "Health of your agent's gateway: version, uptime, model",
      "GET /api/agent?action=sessions": "Your agent's chat sessions",
      "GET /api/agent?action=session&sessionId=…": "One session with its messages",
      "GET /api/agent?action=memory": "The last 10 messages of the active session (truncated)",
      "GET /api/agent?action=skills": "Skills available on your instance",
      "GET /api/agent?action=credentials": "Which credentials are configured (never the values)",
      "POST /api/agent {action: 'chat', message, sessionId?}": "Send a message, get the reply",
      "POST /api/agent {action: 'create-session'}": "Start a new session",
      "POST /api/agent {action: 'update-skill', skillId, enabled}": "Turn a skill on or off",
      "POST /api/agent {action: 'set-credential', key, value}":
        "Configure a provider key or channel token",
      "GET /api/agent/whatsapp": "The WhatsApp channel's state (configured, linked, connected)",
      "POST /api/agent/whatsapp {action: 'start' | 'wait'}":
        "Link WhatsApp: a QR to scan (start), then wait for the scan",
      "GET /api/memory?agentId=…": "An agent's long-term memory (MEMORY.md; default: your first)",
      "POST /api/memory {content, mode?: 'append' | 'replace', agentId?}":
        "Store memory: append an entry (default) or replace it",
      "GET /api/heartbeat": "Heartbeat settings: how often your agents wake up on their own",
      "POST /api/heartbeat {enabled?, every?, prompt?, activeHours?, target?, …}":
        "Change heartbeat settings (null resets one)",
      "DELETE /api/heartbeat": "Reset heartbeat settings to OpenClaw's defaults",
    },
  };
}
