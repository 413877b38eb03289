import { HttpResponse, http } from "msw";
import {
  type FakeProviderState,
  failure,
  fakeState,
  listingFailure,
  pieces,
  sseResponse,
} from "./fake-provider.ts";

// OpenAI's API as it answers on the wire: GET /v1/models and POST /v1/chat/completions (JSON
// and server-sent events with `stream_options.include_usage`). OpenRouter's chat endpoint is
// the same format (./openrouter.ts reuses `chatCompletionsHandler`).

export const OPENAI_BASE = "https://api.openai.com/v1";

const openAiError = (status: number) => ({
  error: {
    message:
      status === 401
        ? "Incorrect API key provided: sk-wrong. You can find your API key at https://platform.openai.com/account/api-keys."
        : status === 429
          ? "Rate limit reached for gpt-4o in organization org-test on requests per min (RPM): Limit 500, Used 500, Requested 1."
          : status === 400
            ? "Invalid value for 'temperature': must be between 0 and 2."
            : "The server had an error while processing your request. Sorry about that!",
    type: status === 401 || status === 400 ? "invalid_request_error" : "server_error",
    param: null,
    code: status === 401 ? "invalid_api_key" : null,
  },
});

export function chatCompletionsHandler(
  base: string,
  state: FakeProviderState,
  extra: Record<string, unknown> = {},
) {
  return http.post(`${base}/chat/completions`, async ({ request }) => {
    const body = (await request.json()) as {
      model: string;
      stream?: boolean;
      stream_options?: { include_usage?: boolean };
    };
    state.calls.push({ url: request.url, headers: request.headers, body });
    if (state.gate) await state.gate;
    // A keyless local server (apiKey "") accepts anything.
    if (state.apiKey && request.headers.get("authorization") !== `Bearer ${state.apiKey}`) {
      return HttpResponse.json(openAiError(401), { status: 401 });
    }
    const failed = await failure(state, openAiError);
    if (failed) return failed;
    const id = `chatcmpl-${Math.random().toString(36).slice(2, 12)}`;
    const created = 1_750_000_000;
    const reply = state.replyFor ? state.replyFor(body as Record<string, unknown>) : state.reply;
    const told = state.usageFor ? state.usageFor(body as Record<string, unknown>) : state.usage;
    const usage = told && {
      prompt_tokens: told.prompt,
      completion_tokens: told.completion,
      total_tokens: told.prompt + told.completion,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: 0,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
      },
    };
    if (!body.stream) {
      return HttpResponse.json({
        id,
        object: "chat.completion",
        created,
        model: body.model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: reply, refusal: null, annotations: [] },
            logprobs: null,
            finish_reason: "stop",
          },
        ],
        ...(usage ? { usage } : {}),
        service_tier: "default",
        system_fingerprint: "fp_test",
        ...extra,
      });
    }
    const chunk = (delta: object, finish: string | null = null) =>
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created,
        model: body.model,
        system_fingerprint: "fp_test",
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        ...extra,
      })}\n\n`;
    const blocks = [
      chunk({ role: "assistant", content: "", refusal: null }),
      ...pieces(reply).map((p) => chunk({ content: p })),
      chunk({}, "stop"),
    ];
    if (body.stream_options?.include_usage && usage) {
      blocks.push(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: body.model, choices: [], usage, ...extra })}\n\n`,
      );
    }
    blocks.push("data: [DONE]\n\n");
    return sseResponse(
      blocks,
      state.openStream ? { request, record: state.openStream } : undefined,
    );
  });
}

export function createOpenAiFake(base = OPENAI_BASE, overrides: Partial<FakeProviderState> = {}) {
  const state = fakeState({
    models: ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o4-mini", "text-embedding-3-small", "dall-e-3"],
    ...overrides,
  });
  const handlers = [
    http.get(`${base}/models`, async ({ request }) => {
      state.calls.push({ url: request.url, headers: request.headers, body: undefined });
      const failed = await listingFailure(state);
      if (failed) return failed;
      if (state.apiKey && request.headers.get("authorization") !== `Bearer ${state.apiKey}`) {
        return HttpResponse.json(openAiError(401), { status: 401 });
      }
      return HttpResponse.json({
        object: "list",
        data: state.models.map((id) => ({
          id,
          object: "model",
          created: 1_715_367_049,
          owned_by: "system",
        })),
      });
    }),
    chatCompletionsHandler(base, state),
  ];
  return { state, handlers };
}
