import { HttpResponse, http } from "msw";
import {
  type FakeProviderState,
  failure,
  fakeState,
  listingFailure,
  pieces,
  sseResponse,
} from "./fake-provider.ts";

// Google's Gemini API (generativelanguage v1beta) as it answers on the wire: GET /v1beta/models
// and POST /v1beta/models/{model}:generateContent | :streamGenerateContent?alt=sse. A bad key
// is a 400 INVALID_ARGUMENT, as Google answers it.

export const GOOGLE_BASE = "https://generativelanguage.googleapis.com";

const googleError = (status: number) => ({
  error: {
    code: status,
    message:
      status === 400
        ? "API key not valid. Please pass a valid API key."
        : status === 429
          ? "Resource has been exhausted (e.g. check quota)."
          : status === 503
            ? "The model is overloaded. Please try again later."
            : "Internal error encountered.",
    status:
      status === 400
        ? "INVALID_ARGUMENT"
        : status === 429
          ? "RESOURCE_EXHAUSTED"
          : status === 503
            ? "UNAVAILABLE"
            : "INTERNAL",
  },
});

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

export function createGoogleFake(base = GOOGLE_BASE, overrides: Partial<FakeProviderState> = {}) {
  const state = fakeState({ models: ["gemini-2.5-flash", "gemini-2.5-pro"], ...overrides });
  const authorised = (request: Request) => request.headers.get("x-goog-api-key") === state.apiKey;
  const generate = new RegExp(
    `^${escapeRegExp(base)}/v1beta/models/([^/:?]+):(generateContent|streamGenerateContent)`,
  );
  const handlers = [
    http.get(`${base}/v1beta/models`, async ({ request }) => {
      state.calls.push({ url: request.url, headers: request.headers, body: undefined });
      const failed = await listingFailure(state);
      if (failed) return failed;
      if (!authorised(request)) return HttpResponse.json(googleError(400), { status: 400 });
      return HttpResponse.json({
        models: [
          ...state.models.map((id) => ({
            name: `models/${id}`,
            version: "001",
            displayName: id.replace(/^gemini/, "Gemini").replace(/-/g, " "),
            description: `Fake ${id}`,
            inputTokenLimit: 1_048_576,
            outputTokenLimit: 65_536,
            supportedGenerationMethods: ["generateContent", "countTokens", "createCachedContent"],
            temperature: 1,
            topP: 0.95,
            topK: 64,
            maxTemperature: 2,
            thinking: true,
          })),
          {
            name: "models/text-embedding-004",
            version: "004",
            displayName: "Text Embedding 004",
            description: "Obtain a distributed representation of a text.",
            inputTokenLimit: 2048,
            outputTokenLimit: 1,
            supportedGenerationMethods: ["embedContent"],
          },
        ],
      });
    }),
    http.post(generate, async ({ request }) => {
      const [, model, method] = generate.exec(request.url) ?? [];
      const body = (await request.json()) as object;
      state.calls.push({ url: request.url, headers: request.headers, body });
      if (state.gate) await state.gate;
      if (!authorised(request)) return HttpResponse.json(googleError(400), { status: 400 });
      const failed = await failure(state, googleError);
      if (failed) return failed;
      const usage = state.usage;
      const usageMetadata = usage && {
        promptTokenCount: usage.prompt,
        candidatesTokenCount: usage.completion,
        totalTokenCount: usage.prompt + usage.completion,
        promptTokensDetails: [{ modality: "TEXT", tokenCount: usage.prompt }],
      };
      if (method === "generateContent") {
        return HttpResponse.json({
          candidates: [
            {
              content: { parts: [{ text: state.reply }], role: "model" },
              finishReason: "STOP",
              index: 0,
            },
          ],
          ...(usageMetadata ? { usageMetadata } : {}),
          modelVersion: model,
          responseId: "mKdUaPzHLuWz1dkPkcCq6Ac",
        });
      }
      const parts = pieces(state.reply);
      return sseResponse(
        parts.map(
          (text, i) =>
            `data: ${JSON.stringify({
              candidates: [
                {
                  content: { parts: [{ text }], role: "model" },
                  ...(i === parts.length - 1 ? { finishReason: "STOP" } : {}),
                  index: 0,
                },
              ],
              ...(usageMetadata && i === parts.length - 1 ? { usageMetadata } : {}),
              modelVersion: model,
              responseId: "mKdUaPzHLuWz1dkPkcCq6Ac",
            })}\r\n\r\n`,
        ),
      );
    }),
  ];
  return { state, handlers };
}
