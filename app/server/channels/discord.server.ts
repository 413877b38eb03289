import { env } from "../platform/env.server.ts";
import { CredentialRejected, fetchWithTimeout, jsonOf, ServiceUnavailable } from "./http.server.ts";

// Discord API client (chatapp2): checks a bot token by reading the bot's own application,
// GET /applications/@me with `Authorization: Bot <token>` (401 {message: "401: Unauthorized",
// code: 0} for a bad token).

export interface DiscordApplication {
  id: string;
  name: string;
  botId: string | undefined;
}

export async function discordCurrentApplication(token: string): Promise<DiscordApplication> {
  const base = env().DISCORD_API_URL.replace(/\/$/, "");
  const response = await fetchWithTimeout("Discord", `${base}/applications/@me`, {
    headers: { Authorization: `Bot ${token}` },
  });
  if (response.status === 401 || response.status === 403) {
    const body = await jsonOf<{ message?: string }>("Discord", response).catch(() => ({
      message: undefined,
    }));
    throw new CredentialRejected(body.message ?? "401: Unauthorized");
  }
  if (!response.ok) throw new ServiceUnavailable(`Discord answered ${response.status}`);
  const app = await jsonOf<{ id?: string; name?: string; bot?: { id?: string } }>(
    "Discord",
    response,
  );
  if (!app.id) throw new ServiceUnavailable("Discord answered without an application id");
  return { id: app.id, name: app.name ?? "", botId: app.bot?.id };
}
