import { createHash } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { GatewayRequestError } from "../openclaw/errors.server.ts";
import type { MessageInput } from "./agent-messages.server.ts";

// Gateway chat history (`chat.history` entries) as the platform's messages. Every writer of
// agent_messages that reads a gateway's history (the worker's recorder, the web's chat flows)
// should map entries here, so the same entry always gets the same dedupe key:
// `<session key>|id:<entry id>` (or `|t:<ms>:<role>:<content hash>` without an id).

export interface HistoryMessage {
  role?: string;
  content?: unknown;
  text?: unknown;
  timestamp?: unknown;
  createdAt?: unknown;
  id?: unknown;
  messageId?: unknown;
  __openclaw?: { id?: unknown; seq?: unknown };
}

/** The text of a history entry (string content or the text parts of a content array). */
export function textOf(message: HistoryMessage): string {
  const { content } = message;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) =>
        typeof part === "string"
          ? part
          : part &&
              typeof part === "object" &&
              typeof (part as { text?: unknown }).text === "string"
            ? (part as { text: string }).text
            : "",
      )
      .filter(Boolean)
      .join("\n");
  }
  return typeof message.text === "string" ? message.text : "";
}

function timeOf(message: HistoryMessage): Date | undefined {
  for (const v of [message.timestamp, message.createdAt]) {
    if (typeof v === "number" && Number.isFinite(v)) return new Date(v);
    if (typeof v === "string" && !Number.isNaN(Date.parse(v))) return new Date(v);
  }
  return undefined;
}

/** The gateway's identity of an entry: its id, else its time, role and content hash. */
function identityOf(message: HistoryMessage, time: Date): string {
  const id = message.id ?? message.messageId ?? message.__openclaw?.id;
  if (typeof id === "string" || typeof id === "number") return `id:${id}`;
  const digest = createHash("sha256").update(textOf(message)).digest("hex").slice(0, 16);
  return `t:${time.getTime()}:${message.role}:${digest}`;
}

/** chat.history entries → the platform's messages (user and assistant text only). */
export function messagesOfHistory(sessionKey: string, history: HistoryMessage[]): MessageInput[] {
  const out: MessageInput[] = [];
  for (const m of history) {
    if (m.role !== "user" && m.role !== "assistant") continue;
    const content = textOf(m).trim();
    if (!content) continue;
    const timestamp = timeOf(m) ?? new Date();
    out.push({
      sender: m.role === "user" ? "user" : "agent",
      content,
      timestamp,
      dedupeKey: `${sessionKey}|${identityOf(m, timestamp)}`,
    });
  }
  return out;
}

/** Reads of a history the gateway refused as retryable, tried again (about 4 s in all). */
const HISTORY_RETRIES = 5;

/**
 * A session's recent history (`chat.history`, the last 200 entries). OpenClaw refuses a read
 * that a run's end or a session change overlapped ("session changed while reading history;
 * reload the conversation", UNAVAILABLE, retryable after 250 ms); the read is tried again, with
 * back-off, instead of failing: the soak (issue 52) lost a turn whose recording read met it.
 */
export async function readHistory(
  client: GatewayClient,
  sessionKey: string,
): Promise<HistoryMessage[]> {
  for (let attempt = 0; ; attempt++) {
    try {
      const result = await client.request<{ messages?: HistoryMessage[] }>("chat.history", {
        sessionKey,
        limit: 200,
      });
      return result.messages ?? [];
    } catch (error) {
      const retryAfter = error instanceof GatewayRequestError ? error.retryAfterMs : undefined;
      if (retryAfter === undefined || attempt + 1 >= HISTORY_RETRIES) throw error;
      await delay(Math.min(Math.max(retryAfter, 100) * 2 ** attempt, 2_000));
    }
  }
}
