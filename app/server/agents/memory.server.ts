import { z } from "zod";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { GatewayRequestError } from "../openclaw/errors.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { withGateway } from "./instance-gateway.server.ts";
import { type Target, targetOf } from "./talk-sessions.server.ts";

// An agent's long-term memory (GET/POST /api/memory): OpenClaw's MEMORY.md in the agent's
// workspace, which the gateway injects into the agent's context at the start of a session. Read
// and written over the control protocol (agents.files.get / agents.files.set); the gateway holds
// the only copy. Not the same thing as GET /api/agent?action=memory (the last messages of the
// active session). docs/decisions/0091-heartbeat-and-memory-endpoints.md

export const MEMORY_FILE = "MEMORY.md";
/**
 * Size cap of MEMORY.md through the API, in characters: OpenClaw injects at most
 * `agents.defaults.bootstrapMaxChars` (20 000 by default) of a bootstrap file, so memory beyond
 * that would be stored but not seen by the agent.
 */
export const MEMORY_MAX_CHARS = 20_000;
/** How often an append re-reads the file when another writer changed it in between. */
const APPEND_ATTEMPTS = 3;

/** A platform agent id (`agt_…`); one that is not the caller's is 404, like any unknown one. */
const agentIdSchema = z.string().min(1).max(100);

export const memoryQuerySchema = z.object({ agentId: agentIdSchema.optional() });

export const memoryBodySchema = z
  .object({
    agentId: agentIdSchema.optional(),
    content: z.string().max(MEMORY_MAX_CHARS, `must be at most ${MEMORY_MAX_CHARS} characters`),
    /** append (default): a new entry after what is there; replace: the whole file. */
    mode: z.enum(["append", "replace"]).default("append"),
  })
  .strict()
  .refine((b) => b.mode === "replace" || b.content.trim() !== "", {
    path: ["content"],
    message: "must not be blank when appending",
  });

export type MemoryBody = z.infer<typeof memoryBodySchema>;

interface GatewayFile {
  missing?: boolean;
  content?: string;
  hash?: string;
  updatedAtMs?: number;
}

async function readFile(client: GatewayClient, target: Target): Promise<GatewayFile> {
  const result = await client.request<{ file?: GatewayFile }>("agents.files.get", {
    agentId: target.gatewayAgentId,
    name: MEMORY_FILE,
  });
  return result.file ?? { missing: true };
}

async function writeFile(
  client: GatewayClient,
  target: Target,
  content: string,
  expectedHash?: string,
): Promise<GatewayFile> {
  const result = await client.request<{ file?: GatewayFile }>("agents.files.set", {
    agentId: target.gatewayAgentId,
    name: MEMORY_FILE,
    content,
    ...(expectedHash ? { expectedHash } : {}),
  });
  return result.file ?? {};
}

function memoryView(target: Target, file: GatewayFile) {
  const content = file.missing ? "" : (file.content ?? "");
  return {
    agentId: target.agent?.id ?? null,
    content,
    chars: content.length,
    maxChars: MEMORY_MAX_CHARS,
    /** epoch ms of the file's last change; null when there is no file yet. */
    updatedAt: file.missing ? null : (file.updatedAtMs ?? null),
  };
}

/** A new entry after the existing memory, separated by a blank line; ends with a newline. */
export function appendEntry(existing: string, entry: string): string {
  const before = existing.trimEnd();
  return `${before ? `${before}\n\n` : ""}${entry.trim()}\n`;
}

function tooLarge(chars: number): DomainError {
  return new DomainError(
    400,
    `Memory would be ${chars} characters; the limit is ${MEMORY_MAX_CHARS} (replace it with a shorter version)`,
  );
}

const isConflict = (error: unknown) =>
  error instanceof GatewayRequestError &&
  (error.details as { type?: string } | undefined)?.type === "agent_file_conflict";

/** The gateway does not know the agent yet (its sync to the gateway is pending). */
function notInGateway(error: unknown): Error | undefined {
  if (error instanceof GatewayRequestError && /agent ".*" not found/.test(error.message)) {
    return new DomainError(404, "Agent not found in its gateway yet: try again shortly");
  }
  return undefined;
}

/** The agent's MEMORY.md; 404 for an agent that is not the caller's. */
export async function getMemory(userId: string, agentId?: string) {
  const target = await targetOf(userId, agentId);
  return withGateway(userId, async (client) => {
    try {
      return memoryView(target, await readFile(client, target));
    } catch (error) {
      throw notInGateway(error) ?? error;
    }
  });
}

/**
 * Stores memory: `append` adds an entry (guarded by the file's hash, so a concurrent writer, such
 * as the agent itself, is not overwritten), `replace` writes the whole file. 400 when the result
 * would exceed MEMORY_MAX_CHARS.
 */
export async function storeMemory(userId: string, body: MemoryBody) {
  const target = await targetOf(userId, body.agentId);
  return withGateway(userId, async (client) => {
    try {
      if (body.mode === "replace") {
        await writeFile(client, target, body.content);
      } else {
        for (let attempt = 1; ; attempt++) {
          const current = await readFile(client, target);
          const next = appendEntry(current.missing ? "" : (current.content ?? ""), body.content);
          if (next.length > MEMORY_MAX_CHARS) throw tooLarge(next.length);
          try {
            // A missing file has no hash to guard with; its first write is unconditional.
            await writeFile(client, target, next, current.missing ? undefined : current.hash);
            break;
          } catch (error) {
            if (!isConflict(error) || attempt >= APPEND_ATTEMPTS) throw error;
          }
        }
      }
      // Read back: the answer is what the gateway holds (and its modification time).
      return { mode: body.mode, ...memoryView(target, await readFile(client, target)) };
    } catch (error) {
      throw notInGateway(error) ?? error;
    }
  });
}
