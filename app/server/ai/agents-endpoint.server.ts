import { DomainError } from "../platform/errors.server.ts";
import { json, jsonText } from "../platform/http.server.ts";
import { unsealKeys } from "./byok.server.ts";
import { loadCatalog } from "./catalog.server.ts";
import { complete } from "./completions.server.ts";
import {
  authenticateInstanceToken,
  bearerToken,
  type InstanceIdentity,
} from "./instance-tokens.server.ts";
import type { ChatBody } from "./providers/shared.server.ts";

// The model endpoint of hosted agents: OpenAI's chat-completions API, authenticated by the
// per-instance token the gateway was configured with, metered and billed to its owner.

export async function authenticateInstance(request: Request): Promise<InstanceIdentity> {
  const token = bearerToken(request);
  if (!token) throw new DomainError(401, "Missing bearer token");
  const identity = await authenticateInstanceToken(token);
  if (!identity) throw new DomainError(401, "Invalid or revoked instance token");
  return identity;
}

const overhead = (ms: number) => Math.max(0, ms).toFixed(2);

export async function agentCompletion(request: Request, body: ChatBody, startedAt: number) {
  const identity = await authenticateInstance(request);
  const stream = body.stream === true;
  const result = await complete({
    endpoint: "agents",
    userId: identity.userId,
    instanceId: identity.instanceId,
    userKeys: unsealKeys(identity.sealedKeys),
    body,
    stream,
    signal: request.signal,
    startedAt,
  });
  const headers = {
    "x-ai-provider": result.model.provider,
    "x-ai-model": result.model.id,
    "x-overhead-ms": overhead(result.overheadMs),
  };
  if (result.kind === "stream") {
    return new Response(result.stream, {
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
