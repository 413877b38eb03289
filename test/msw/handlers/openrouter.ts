import { HttpResponse, http } from "msw";
import { type FakeProviderState, fakeState, listingFailure } from "./fake-provider.ts";
import { chatCompletionsHandler } from "./openai.ts";

// OpenRouter as it answers on the wire: GET /api/v1/models with per-token USD prices as decimal
// strings, and OpenAI-format chat completions (plus its `provider` field).

export const OPENROUTER_BASE = "https://openrouter.ai/api/v1";

export interface OpenRouterModel {
  id: string;
  name: string;
  context_length: number;
  prompt: string;
  completion: string;
  inputs?: string[];
}

export const openRouterModels: OpenRouterModel[] = [
  {
    id: "openai/gpt-4o",
    name: "OpenAI: GPT-4o",
    context_length: 128_000,
    prompt: "0.0000025",
    completion: "0.00001",
    inputs: ["text", "image", "file"],
  },
  {
    id: "anthropic/claude-sonnet-4",
    name: "Anthropic: Claude Sonnet 4",
    context_length: 200_000,
    prompt: "0.000003",
    completion: "0.000015",
    inputs: ["image", "text", "file"],
  },
  {
    id: "google/gemini-2.5-flash",
    name: "Google: Gemini 2.5 Flash",
    context_length: 1_048_576,
    prompt: "0.0000003",
    completion: "0.0000025",
    inputs: ["file", "image", "text", "audio"],
  },
  {
    id: "meta-llama/llama-3.3-70b-instruct",
    name: "Meta: Llama 3.3 70B Instruct",
    context_length: 131_072,
    prompt: "0.000000038",
    completion: "0.00000012",
  },
  {
    id: "deepseek/deepseek-r1",
    name: "DeepSeek: R1",
    context_length: 163_840,
    prompt: "0.0000004",
    completion: "0.000002",
  },
  {
    id: "openrouter/auto",
    name: "Auto Router",
    context_length: 2_000_000,
    prompt: "-1",
    completion: "-1",
  },
];

export function createOpenRouterFake(
  base = OPENROUTER_BASE,
  overrides: Partial<FakeProviderState> & { catalog?: OpenRouterModel[] } = {},
) {
  const { catalog = openRouterModels, ...rest } = overrides;
  const state = fakeState({ models: catalog.map((m) => m.id), ...rest });
  const handlers = [
    // The listing is public: no key needed.
    http.get(`${base}/models`, async ({ request }) => {
      state.calls.push({ url: request.url, headers: request.headers, body: undefined });
      const failed = await listingFailure(state);
      if (failed) return failed;
      return HttpResponse.json({
        data: catalog
          .filter((m) => state.models.includes(m.id))
          .map((m) => ({
            id: m.id,
            canonical_slug: m.id,
            hugging_face_id: "",
            name: m.name,
            created: 1_747_930_000,
            description: `${m.name} via OpenRouter.`,
            context_length: m.context_length,
            architecture: {
              modality: m.inputs?.includes("image") ? "text+image->text" : "text->text",
              input_modalities: m.inputs ?? ["text"],
              output_modalities: ["text"],
              tokenizer: "Other",
              instruct_type: null,
            },
            pricing: {
              prompt: m.prompt,
              completion: m.completion,
              request: "0",
              image: "0",
              web_search: "0",
              internal_reasoning: "0",
            },
            top_provider: {
              context_length: m.context_length,
              max_completion_tokens: 16_384,
              is_moderated: false,
            },
            per_request_limits: null,
            supported_parameters: ["max_tokens", "temperature", "top_p", "stop", "tools"],
          })),
      });
    }),
    chatCompletionsHandler(base, state, { provider: "OpenAI" }),
  ];
  return { state, handlers };
}
