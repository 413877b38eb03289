import { Form, useNavigate, useRevalidator, useSearchParams } from "@remix-run/react";
import { type FormEvent, useEffect, useRef, useState } from "react";
import type { chatPage } from "../server/agents/chat-page.server.ts";
import type { FormReply } from "../server/platform/form-action.server.ts";
import { StartingNotice } from "./agent-progress.tsx";
import { AgentTabs } from "./agent-tabs.tsx";
import { Card, Notice } from "./forms.tsx";

// The chat page of an agent (app/routes/agents.$id.chat.tsx), its first tab: sessions, the
// conversation (streamed over the live agent socket when JavaScript runs, a plain form post
// otherwise) and memory. Skills, channels and keys have their own tabs.

export type ChatPageData = Awaited<ReturnType<typeof chatPage>>;

/** What the chat page's action answers on success. */
export interface ChatAnswer {
  message?: string;
  reply?: string;
  sessionId?: string;
}

export type ChatReply = FormReply<ChatAnswer>;

interface Bubble {
  role: string;
  content: string;
}

/** Sends the message over ws://<host>/agent/<user id> and streams the reply into `onText`. */
function streamChat(
  userId: string,
  agentId: string,
  message: string,
  sessionId: string | null,
  onText: (text: string) => void,
): Promise<{ sessionId: string }> {
  return new Promise((resolve, reject) => {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(
      `${scheme}://${window.location.host}/agent/${encodeURIComponent(userId)}`,
    );
    let text = "";
    ws.onmessage = (event) => {
      const frame = JSON.parse(String(event.data)) as {
        type: string;
        text?: string;
        reply?: string;
        sessionId?: string;
        error?: string;
      };
      if (frame.type === "ready") {
        ws.send(
          JSON.stringify({
            type: "chat",
            id: "1",
            message,
            agentId,
            sessionId: sessionId ?? undefined,
          }),
        );
      } else if (frame.type === "delta") {
        text += frame.text ?? "";
        onText(text);
      } else if (frame.type === "final") {
        onText(frame.reply ?? text);
        ws.close();
        resolve({ sessionId: frame.sessionId ?? "" });
      } else if (frame.type === "error") {
        ws.close();
        reject(new Error(frame.error ?? "The agent could not answer"));
      }
    };
    ws.onclose = (event) => {
      if (event.code >= 4000) reject(new Error(event.reason || `Closed (${event.code})`));
    };
    ws.onerror = () => reject(new Error("The live connection failed"));
  });
}

export function AgentChat({ d, reply }: { d: ChatPageData; reply: ChatReply | undefined }) {
  const result = reply?.value;
  const revalidator = useRevalidator();
  const suggestion = useSearchParams()[0].get("suggest")?.slice(0, 2000) ?? undefined;
  const navigate = useNavigate();
  const [live, setLive] = useState<Bubble[]>([]);
  const [streaming, setStreaming] = useState(false);
  const [liveError, setLiveError] = useState<string | null>(null);
  const [hydrated, setHydrated] = useState(false);
  const input = useRef<HTMLTextAreaElement>(null);
  useEffect(() => setHydrated(true), []);
  // Fresh loader data has the turn in the history: the streamed copy is no longer needed.
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs when the loader data changes
  useEffect(() => setLive([]), [d]);

  async function onChat(event: FormEvent<HTMLFormElement>) {
    if (!hydrated || typeof WebSocket === "undefined") return; // plain form post
    event.preventDefault();
    const message = input.current?.value.trim();
    if (!message) return;
    setLiveError(null);
    setStreaming(true);
    setLive([
      { role: "user", content: message },
      { role: "assistant", content: "" },
    ]);
    if (input.current) input.current.value = "";
    try {
      const done = await streamChat(d.userId, d.agent.id, message, d.sessionId, (text) =>
        setLive([
          { role: "user", content: message },
          { role: "assistant", content: text },
        ]),
      );
      // Open the turn's session (the loader reads it from the URL), which reloads the page data.
      setStreaming(false);
      navigate(`?session=${encodeURIComponent(done.sessionId)}`, {
        replace: true,
        preventScrollReset: true,
      });
    } catch (error) {
      setLiveError((error as Error).message);
      setStreaming(false);
      revalidator.revalidate();
    }
  }

  const messages: Bubble[] = [...d.messages, ...live];
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Chat with {d.agent.name}</h1>
      <AgentTabs agentId={d.agent.id} />
      {d.progress ? <StartingNotice agentId={d.agent.id} progress={d.progress} /> : null}
      {d.gatewayError ? <Notice tone="error">{d.gatewayError}</Notice> : null}
      {reply?.error ? (
        <Notice tone="error">{reply.error}</Notice>
      ) : result?.message ? (
        <Notice>{result.message}</Notice>
      ) : null}

      <div className="grid gap-6 md:grid-cols-[14rem_1fr]">
        <Card title="Sessions">
          <ul className="space-y-1 text-sm" data-testid="sessions">
            {d.sessions.map((s) => (
              <li key={s.id}>
                <a
                  href={`?session=${encodeURIComponent(s.id)}`}
                  className={s.id === d.sessionId ? "font-semibold underline" : "underline"}
                >
                  {new Date(s.lastActivity).toLocaleString()} ({s.messageCount})
                </a>
              </li>
            ))}
          </ul>
          <Form method="post" className="mt-3">
            <input type="hidden" name="intent" value="new-session" />
            <button type="submit" className="rounded-md border px-3 py-1 text-sm">
              New session
            </button>
          </Form>
        </Card>

        <Card title="Conversation">
          <ol className="space-y-2" data-testid="messages">
            {messages.map((m, i) => (
              <li
                // biome-ignore lint/suspicious/noArrayIndexKey: a transcript is append-only
                key={i}
                data-role={m.role}
                className={m.role === "user" ? "text-right" : "text-left"}
              >
                <span className="inline-block max-w-prose whitespace-pre-wrap rounded-lg bg-slate-100 px-3 py-2 text-sm">
                  {m.content}
                </span>
              </li>
            ))}
            {!hydrated && result?.reply && !d.messages.some((m) => m.content === result.reply) ? (
              <li data-role="assistant" className="text-left">
                <span className="inline-block rounded-lg bg-slate-100 px-3 py-2 text-sm">
                  {result.reply}
                </span>
              </li>
            ) : null}
          </ol>
          {liveError ? <p className="text-red-700">{liveError}</p> : null}
          <Form method="post" onSubmit={onChat} className="mt-4 space-y-2">
            <input type="hidden" name="intent" value="chat" />
            {d.sessionId ? <input type="hidden" name="sessionId" value={d.sessionId} /> : null}
            <label className="block text-sm font-medium" htmlFor="message">
              Message
            </label>
            <textarea
              ref={input}
              id="message"
              name="message"
              rows={3}
              // After onboarding: a first message to send (the person may edit it).
              defaultValue={suggestion}
              className="w-full rounded-md border px-3 py-2"
            />
            <button
              type="submit"
              disabled={streaming}
              className="rounded-md bg-slate-900 px-4 py-2 text-white"
            >
              {streaming
                ? d.progress
                  ? "Waiting for your agent to start…"
                  : "Answering…"
                : "Send"}
            </button>
          </Form>
        </Card>
      </div>

      <Card title="Memory (last 10 messages of the active session)">
        <ul className="space-y-1 text-sm" data-testid="memory">
          {d.memory.map((m, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: a snapshot list without ids
            <li key={i}>
              <strong>{m.role}:</strong> {m.content}
            </li>
          ))}
        </ul>
      </Card>
    </div>
  );
}
