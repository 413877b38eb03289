import {
  getMemory,
  MEMORY_MAX_CHARS,
  memoryBodySchema,
  memoryQuerySchema,
  storeMemory,
} from "../server/agents/memory.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

// Long-term memory (MEMORY.md) of one of the caller's agents:
// docs/decisions/0091-heartbeat-and-memory-endpoints.md

const errors =
  "404 when the agent is not yours or you have no instance; 502 when the gateway does not answer.";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Read an agent's long-term memory (MEMORY.md)",
    description: `agentId: one of your agents (default: your first). \`{agentId, content, chars, maxChars, updatedAt}\`. ${errors}`,
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    query: memoryQuerySchema,
    handler: ({ auth, query }) => getMemory(auth.user.id, query.agentId),
  }),
  POST: endpoint({
    summary: "Store agent memory: append an entry (default) or replace it",
    description: `\`{content, mode?: "append" | "replace", agentId?}\`; answers like GET plus mode. 400 when the memory would exceed ${MEMORY_MAX_CHARS} characters. ${errors}`,
    auth: "user",
    permission: "agents.configure",
    rateLimit: "agents",
    body: memoryBodySchema,
    handler: ({ auth, body }) => storeMemory(auth.user.id, body),
  }),
});
