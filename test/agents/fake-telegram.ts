import { createServer, type Server } from "node:http";

// A local stand-in of the Telegram Bot API (https://core.telegram.org/bots/api) that a gateway
// container can reach over its bridge network: the methods OpenClaw's Telegram channel calls
// when it starts and long-polls (getMe, deleteWebhook, getUpdates, sendMessage, …), in their
// wire format ({ok, result}). Tests queue updates (a user writing to the bot) and read what the
// bot sent back. msw cannot serve this: the caller is another process.

export interface SentMessage {
  method: string;
  chatId: string;
  text: string;
}

export interface FakeTelegram {
  server: Server;
  port: number;
  token: string;
  calls: string[];
  /** The offset of every getUpdates call (undefined: none passed). */
  polls: Array<number | undefined>;
  sent: SentMessage[];
  /** A private message from `from` to the bot (delivered by the next getUpdates). */
  userWrites(text: string, from?: { id: number; first_name: string }): void;
  close(): void;
}

const BOT = {
  id: 7000001,
  is_bot: true,
  first_name: "Platform Bot",
  username: "platform_test_bot",
};

export async function startFakeTelegram(token = "7000001:TEST-token"): Promise<FakeTelegram> {
  const calls: string[] = [];
  const polls: Array<number | undefined> = [];
  // As Telegram does: an update is confirmed (gone for good) once getUpdates is called with an
  // offset above its id; a call without an offset confirms nothing.
  let confirmedBelow = 0;
  const sent: SentMessage[] = [];
  const updates: Array<{ update_id: number; message: Record<string, unknown> }> = [];
  const waiting = new Set<() => void>();
  let nextUpdate = 1;
  let nextMessage = 100;

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://telegram.test");
    const match = /^\/bot([^/]+)\/(\w+)$/.exec(url.pathname);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let params: Record<string, unknown> = Object.fromEntries(url.searchParams);
    if (raw) {
      try {
        params = { ...params, ...(JSON.parse(raw) as Record<string, unknown>) };
      } catch {
        params = { ...params, ...Object.fromEntries(new URLSearchParams(raw)) };
      }
    }
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (!match || match[1] !== token) {
      reply(401, { ok: false, error_code: 401, description: "Unauthorized" });
      return;
    }
    const method = match[2] as string;
    calls.push(method);
    switch (method) {
      case "getMe":
        return reply(200, { ok: true, result: { ...BOT, can_join_groups: true } });
      case "getWebhookInfo":
        return reply(200, { ok: true, result: { url: "", pending_update_count: 0 } });
      case "getUpdates": {
        const offset = params.offset === undefined ? undefined : Number(params.offset);
        polls.push(offset);
        if (offset !== undefined && offset > confirmedBelow) confirmedBelow = offset;
        const timeoutMs = Math.min(Number(params.timeout ?? 0), 5) * 1000;
        const ready = () => updates.filter((u) => u.update_id >= confirmedBelow);
        if (ready().length === 0 && timeoutMs > 0) {
          await new Promise<void>((resolve) => {
            const wake = () => {
              waiting.delete(wake);
              clearTimeout(timer);
              resolve();
            };
            const timer = setTimeout(wake, timeoutMs);
            waiting.add(wake);
          });
        }
        return reply(200, { ok: true, result: ready() });
      }
      case "sendMessage":
      case "editMessageText": {
        const text = String(params.text ?? "");
        const chatId = String(params.chat_id ?? "");
        sent.push({ method, chatId, text });
        return reply(200, {
          ok: true,
          result: {
            message_id: nextMessage++,
            date: Math.floor(Date.now() / 1000),
            chat: { id: Number(chatId), type: "private" },
            from: BOT,
            text,
          },
        });
      }
      default:
        // deleteWebhook, setMyCommands, sendChatAction, setMessageReaction, …
        return reply(200, { ok: true, result: true });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "0.0.0.0", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    server,
    port,
    token,
    calls,
    polls,
    sent,
    userWrites(text, from = { id: 424242, first_name: "Ada" }) {
      updates.push({
        update_id: nextUpdate++,
        message: {
          message_id: nextMessage++,
          date: Math.floor(Date.now() / 1000),
          chat: { id: from.id, type: "private", first_name: from.first_name },
          from: { ...from, is_bot: false, language_code: "en" },
          text,
        },
      });
      for (const wake of [...waiting]) wake();
    },
    close() {
      for (const wake of [...waiting]) wake();
      server.closeAllConnections();
      server.close();
    },
  };
}
