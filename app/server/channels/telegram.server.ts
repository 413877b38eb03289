import { z } from "zod";
import { env } from "../platform/env.server.ts";
import { CredentialRejected, fetchWithTimeout, jsonOf, ServiceUnavailable } from "./http.server.ts";

// Telegram Bot API client (chatapp1): checks a bot token with getMe.
// https://core.telegram.org/bots/api#getme — answers {ok: true, result: User} or
// {ok: false, error_code, description} (401 "Unauthorized" for a bad token, 404 for a malformed one).

export interface TelegramBot {
  id: number;
  username: string;
  firstName: string;
}

export async function telegramGetMe(token: string): Promise<TelegramBot> {
  // A token is "<bot id>:<secret>"; anything else cannot be put into the URL path safely.
  if (!/^\d+:[A-Za-z0-9_-]+$/.test(token)) throw new CredentialRejected("malformed bot token");
  const base = env().TELEGRAM_API_URL.replace(/\/$/, "");
  const response = await fetchWithTimeout("Telegram", `${base}/bot${token}/getMe`);
  const body = await jsonOf<{
    ok: boolean;
    result?: { id: number; is_bot: boolean; username?: string; first_name?: string };
    error_code?: number;
    description?: string;
  }>("Telegram", response);
  if (body.ok && body.result?.is_bot) {
    return {
      id: body.result.id,
      username: body.result.username ?? "",
      firstName: body.result.first_name ?? "",
    };
  }
  if (response.status === 401 || response.status === 404) {
    throw new CredentialRejected(body.description ?? "Unauthorized");
  }
  throw new ServiceUnavailable(
    `Telegram answered ${response.status}: ${body.description ?? "unexpected answer"}`,
  );
}

const pendingUpdates = z.object({
  ok: z.boolean(),
  result: z.array(z.object({ update_id: z.number().int() }).loose()).optional(),
  description: z.string().optional(),
});

/**
 * The highest update id waiting for the bot, without consuming anything: getUpdates with no
 * offset and no timeout. Telegram confirms (deletes) updates only when getUpdates is called with
 * an offset above their id (https://core.telegram.org/bots/api#getupdates), so a peek that never
 * passes an offset leaves every update for the gateway to read. Null when none is waiting. Only
 * while the bot's gateway is not polling: two getUpdates at once answer 409 Conflict.
 */
export async function telegramPendingUpdate(token: string): Promise<number | null> {
  if (!/^\d+:[A-Za-z0-9_-]+$/.test(token)) throw new CredentialRejected("malformed bot token");
  const base = env().TELEGRAM_API_URL.replace(/\/$/, "");
  const response = await fetchWithTimeout(
    "Telegram",
    `${base}/bot${token}/getUpdates?timeout=0&limit=100`,
  );
  const body = pendingUpdates.parse(await jsonOf("Telegram", response));
  if (!body.ok) {
    if (response.status === 401 || response.status === 404) {
      throw new CredentialRejected(body.description ?? "Unauthorized");
    }
    throw new ServiceUnavailable(`Telegram answered ${response.status}: ${body.description}`);
  }
  const ids = (body.result ?? []).map((u) => u.update_id);
  return ids.length ? Math.max(...ids) : null;
}
