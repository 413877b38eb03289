import { db } from "../platform/db.server.ts";
import { randomAlphanumeric } from "../platform/ids.server.ts";
import { chat } from "./talk.server.ts";

// The send-message endpoint (POST/GET /api/chat): each message goes to the user's agent in its
// active session (like POST /api/agent chat) and is kept with its reply and topic.

export const DEFAULT_TOPIC = "general";

interface ChatRow {
  id: string;
  topic: string;
  message: string;
  reply: string;
  status: string;
  created_at: Date;
}

const view = (r: ChatRow) => ({
  id: r.id,
  message: r.message,
  topic: r.topic,
  status: r.status,
  timestamp: r.created_at.toISOString(),
  reply: r.reply,
});

export async function sendChatMessage(userId: string, input: { message: string; topic?: string }) {
  const topic = input.topic?.trim() || DEFAULT_TOPIC;
  const turn = await chat(userId, { message: input.message });
  const [row] = await db()<ChatRow[]>`
    insert into chat_messages (id, user_id, topic, message, reply, status, session_key)
    values (${`chat_${randomAlphanumeric(20)}`}, ${userId}, ${topic}, ${input.message},
            ${turn.reply}, 'sent', ${turn.sessionId})
    returning *`;
  return view(row as ChatRow);
}

/** The user's messages, newest first (at most the last 100), and how many there are. */
export async function listChatMessages(userId: string) {
  const [rows, [count]] = await Promise.all([
    db()<ChatRow[]>`select * from chat_messages where user_id = ${userId}
      order by created_at desc, id desc limit 100`,
    db()<{ n: number }[]>`select count(*)::int as n from chat_messages where user_id = ${userId}`,
  ]);
  return { messages: rows.map(view), count: count?.n ?? 0 };
}
