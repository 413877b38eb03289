import { HttpResponse, http } from "msw";

// Discord's GET /applications/@me (the bot's own application, `Authorization: Bot <token>`):
// the application object for a valid bot token, 401 {message: "401: Unauthorized", code: 0}
// otherwise. `state.down` answers 503 like Discord during an outage.

export const DISCORD_BASE = "https://discord.com/api/v10";

export function createDiscordFake(base = DISCORD_BASE) {
  const state = { tokens: new Set<string>(), down: false, calls: 0 };
  const handlers = [
    http.get(`${base}/applications/@me`, ({ request }) => {
      state.calls += 1;
      if (state.down) {
        return HttpResponse.json({ message: "Service Unavailable", code: 0 }, { status: 503 });
      }
      const auth = request.headers.get("authorization") ?? "";
      const token = auth.startsWith("Bot ") ? auth.slice(4) : "";
      if (!state.tokens.has(token)) {
        return HttpResponse.json({ message: "401: Unauthorized", code: 0 }, { status: 401 });
      }
      return HttpResponse.json({
        id: "1234567890123456789",
        name: "Test Agent",
        icon: null,
        description: "",
        type: null,
        bot: {
          id: "1234567890123456789",
          username: "Test Agent",
          avatar: null,
          discriminator: "0000",
          public_flags: 0,
          flags: 0,
          bot: true,
          banner: null,
          accent_color: null,
          global_name: null,
        },
        summary: "",
        bot_public: true,
        bot_require_code_grant: false,
        verify_key: "a".repeat(64),
        flags: 0,
        hook: true,
        is_monetized: false,
        integration_types_config: { "0": {} },
      });
    }),
  ];
  return { state, handlers };
}
