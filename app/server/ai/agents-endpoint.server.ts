import { DomainError } from "../platform/errors.server.ts";
import { json, jsonText, OVERHEAD_HEADER, overheadMs } from "../platform/http.server.ts";
import { holdingRequest } from "../platform/request-hold.server.ts";
import { takeAgentHint } from "./agent-hint.server.ts";
import { unsealKeys } from "./byok.server.ts";
import { loadCatalog } from "./catalog.server.ts";
import { complete, type Upstream, withOverhead } from "./completions.server.ts";
import { creditRefusal } from "./credit-refusal.server.ts";
import {
  authenticateInstanceToken,
  bearerToken,
  type TokenIdentity,
} from "./instance-tokens.server.ts";
import { type ChatBody, openAiUsage, sseData } from "./providers/shared.server.ts";
import { isWarmUpTurn } from "./warmup-tag.server.ts";

// The model endpoint of hosted agents: OpenAI's chat-completions API, authenticated by the
// per-instance token the gateway was configured with, metered and billed to its owner. A pooled
// gateway's warm-up token (decision 0038), and a tenant gateway's tagged dry-run turn (decision
// 0087), get a fixed minimal answer from here instead.

export async function authenticateInstance(request: Request): Promise<TokenIdentity> {
  const token = bearerToken(request);
  if (!token) throw new DomainError(401, "Missing bearer token");
  const identity = await authenticateInstanceToken(token);
  if (!identity) throw new DomainError(401, "Invalid or revoked instance token");
  return identity;
}

/** Every answer, errors included, carries `x-overhead-ms` (the platform's own time). */
export function agentCompletion(request: Request, body: ChatBody, startedAt: number) {
  return withOverhead(startedAt, (upstream) =>
    agentAnswer(request, body, startedAt, upstream).catch((error: unknown) => {
      if (!(error instanceof DomainError) || error.status !== 402) throw error;
      const response = creditRefusal(error);
      response.headers.set(
        OVERHEAD_HEADER,
        overheadMs(performance.now() - startedAt - upstream.ms),
      );
      return response;
    }),
  );
}

async function agentAnswer(
  request: Request,
  body: ChatBody,
  startedAt: number,
  upstream: Upstream,
): Promise<Response> {
  const identity = await authenticateInstance(request);
  const stream = body.stream === true;
  if (identity.warmup || isWarmUpTurn(body.messages, identity.instanceId)) {
    return warmupCompletion(body, stream);
  }
  // The agent the call is for, as the gateway config names it (decision 0225).
  const { body: forwarded, agentHint } = takeAgentHint(body);
  const result = await complete({
    endpoint: "agents",
    userId: identity.userId,
    instanceId: identity.instanceId,
    agentHint,
    userKeys: unsealKeys(identity.sealedKeys),
    body: forwarded,
    stream,
    signal: request.signal,
    startedAt,
    upstream,
  });
  const headers = {
    "x-ai-provider": result.model.provider,
    "x-ai-model": result.model.id,
    [OVERHEAD_HEADER]: overheadMs(result.overheadMs),
  };
  if (result.kind === "stream") {
    // Held until the answer ends: a gateway gone mid-stream must still abort the upstream call.
    return new Response(holdingRequest(result.stream, request), {
      headers: {
        ...headers,
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-accel-buffering": "no",
      },
    });
  }
  // An OpenAI-compatible provider's answer goes out as received (no re-serialisation).
  const { raw, openai } = result.completion;
  return raw !== undefined ? jsonText(raw, { headers }) : json(openai, { headers });
}

/** What a pooled gateway's dry-run turn is answered (OpenAI's wire format, never metered). */
export const WARMUP_REPLY = "OK";

/**
 * A warm-up turn: the same request path as a tenant's (so the gateway warms the code it will run
 * for them), answered here with a fixed minimal completion. No provider is called and nobody is
 * billed.
 */
function warmupCompletion(body: ChatBody, stream: boolean): Response {
  const id = `chatcmpl-warmup-${Date.now().toString(36)}`;
  const created = Math.floor(Date.now() / 1000);
  const usage = openAiUsage({ promptTokens: 0, completionTokens: 0 });
  const headers = { "x-ai-provider": "platform", "x-ai-model": body.model };
  if (!stream) {
    return json(
      {
        id,
        object: "chat.completion",
        created,
        model: body.model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: WARMUP_REPLY },
            finish_reason: "stop",
          },
        ],
        usage,
      },
      { headers },
    );
  }
  const chunk = (choices: unknown[], extra: object = {}) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model: body.model,
    choices,
    ...extra,
  });
  const events = [
    chunk([{ index: 0, delta: { role: "assistant", content: WARMUP_REPLY }, finish_reason: null }]),
    chunk([{ index: 0, delta: {}, finish_reason: "stop" }]),
    chunk([], { usage }),
  ];
  const sse = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const e of events) controller.enqueue(sseData(e));
      controller.enqueue(sseData("[DONE]"));
      controller.close();
    },
  });
  return new Response(sse, {
    headers: {
      ...headers,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
    },
  });
}

/** GET /api/ai/v1/models in OpenAI's list format. */
export async function agentModels(request: Request) {
  await authenticateInstance(request);
  const { models } = await loadCatalog();
  const seen = new Set<string>();
  const data = [];
  for (const m of models) {
    if (seen.has(m.id)) continue;
    seen.add(m.id);
    data.push({ id: m.id, object: "model", created: 0, owned_by: m.provider });
  }
  return { object: "list", data };
}
