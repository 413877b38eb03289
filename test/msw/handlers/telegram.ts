import { HttpResponse, http } from "msw";

// Telegram Bot API as it answers getMe (https://core.telegram.org/bots/api#getme): the bot's
// User for a valid token, {ok:false, error_code:401, description:"Unauthorized"} otherwise.
// `state.down` makes the service answer 502 like Telegram's front end when it is down.

export const TELEGRAM_BASE = "https://api.telegram.org";

export function createTelegramFake(base = TELEGRAM_BASE) {
  const state = { tokens: new Set<string>(), down: false, calls: 0 };
  const handlers = [
    http.get(`${base}/:bot/getMe`, ({ params }) => {
      state.calls += 1;
      if (state.down) return new HttpResponse("<html>502 Bad Gateway</html>", { status: 502 });
      const token = String(params.bot).replace(/^bot/, "");
      if (!state.tokens.has(token)) {
        return HttpResponse.json(
          { ok: false, error_code: 401, description: "Unauthorized" },
          { status: 401 },
        );
      }
      const id = Number(token.split(":")[0]);
      return HttpResponse.json({
        ok: true,
        result: {
          id,
          is_bot: true,
          first_name: "Test Agent",
          username: "test_agent_bot",
          can_join_groups: true,
          can_read_all_group_messages: false,
          supports_inline_queries: false,
          can_connect_to_business: false,
          has_main_web_app: false,
        },
      });
    }),
  ];
  return { state, handlers };
}
