import { HttpResponse, http } from "msw";
import {
  type FakeProviderState,
  failure,
  fakeState,
  listingFailure,
  pieces,
  sseResponse,
} from "./fake-provider.ts";

// Anthropic's API as it answers on the wire: GET /v1/models (paged) and POST /v1/messages
// (JSON, or named server-sent events: message_start, content_block_*, message_delta, …).

export const ANTHROPIC_BASE = "https://api.anthropic.com";

const anthropicError = (status: number) => ({
  type: "error",
  error:
    status === 401
      ? { type: "authentication_error", message: "invalid x-api-key" }
      : status === 529
        ? { type: "overloaded_error", message: "Overloaded" }
        : status === 429
          ? {
              type: "rate_limit_error",
              message: "Number of request tokens has exceeded your rate limit.",
            }
          : status === 400
            ? {
                type: "invalid_request_error",
                message: "messages: at least one message is required",
              }
            : { type: "api_error", message: "Internal server error" },
});

const displayNames: Record<string, string> = {
  "claude-sonnet-4-20250514": "Claude Sonnet 4",
  "claude-3-5-haiku-20241022": "Claude Haiku 3.5",
  "claude-opus-4-20250514": "Claude Opus 4",
};

export function createAnthropicFake(
  base = ANTHROPIC_BASE,
  overrides: Partial<FakeProviderState> = {},
) {
  const state = fakeState({
    models: ["claude-sonnet-4-20250514", "claude-3-5-haiku-20241022"],
    ...overrides,
  });
  const authorised = (request: Request) =>
    request.headers.get("x-api-key") === state.apiKey &&
    request.headers.get("anthropic-version") === "2023-06-01";
  const handlers = [
    http.get(`${base}/v1/models`, async ({ request }) => {
      state.calls.push({ url: request.url, headers: request.headers, body: undefined });
      const failed = await listingFailure(state);
      if (failed) return failed;
      if (!authorised(request)) return HttpResponse.json(anthropicError(401), { status: 401 });
      const data = state.models.map((id) => ({
        type: "model",
        id,
        display_name: displayNames[id] ?? id,
        created_at: "2025-05-22T00:00:00Z",
      }));
      return HttpResponse.json({
        data,
        has_more: false,
        first_id: data[0]?.id ?? null,
        last_id: data.at(-1)?.id ?? null,
      });
    }),
    http.post(`${base}/v1/messages`, async ({ request }) => {
      const body = (await request.json()) as {
        model: string;
        stream?: boolean;
        max_tokens?: number;
      };
      state.calls.push({ url: request.url, headers: request.headers, body });
      if (state.gate) await state.gate;
      if (!authorised(request)) return HttpResponse.json(anthropicError(401), { status: 401 });
      if (typeof body.max_tokens !== "number") {
        return HttpResponse.json(
          {
            type: "error",
            error: { type: "invalid_request_error", message: "max_tokens: Field required" },
          },
          { status: 400 },
        );
      }
      const failed = await failure(state, anthropicError);
      if (failed) return failed;
      const id = "msg_01XFDUDYJgAACzvnptvVoYEL";
      const usage = state.usage ?? { prompt: 0, completion: 0 };
      if (!body.stream) {
        return HttpResponse.json({
          id,
          type: "message",
          role: "assistant",
          model: body.model,
          content: [{ type: "text", text: state.reply }],
          stop_reason: "end_turn",
          stop_sequence: null,
          usage: {
            input_tokens: usage.prompt,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            output_tokens: usage.completion,
            service_tier: "standard",
          },
        });
      }
      const event = (name: string, data: object) =>
        `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
      return sseResponse([
        event("message_start", {
          message: {
            id,
            type: "message",
            role: "assistant",
            model: body.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: usage.prompt, output_tokens: 1 },
          },
        }),
        event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
        event("ping", {}),
        ...pieces(state.reply).map((text) =>
          event("content_block_delta", { index: 0, delta: { type: "text_delta", text } }),
        ),
        event("content_block_stop", { index: 0 }),
        event("message_delta", {
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: usage.completion },
        }),
        event("message_stop", {}),
      ]);
    }),
  ];
  return { state, handlers };
}
