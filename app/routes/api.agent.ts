import { z } from "zod";
import { CREDENTIAL_KEYS, setCredential } from "../server/agents/channels.server.ts";
import { chat } from "../server/agents/talk.server.ts";
import {
  createSession,
  getSession,
  listSessions,
  memory,
} from "../server/agents/talk-sessions.server.ts";
import { listSkills, updateSkill } from "../server/agents/talk-skills.server.ts";
import { credentials, describeApi, health } from "../server/agents/talk-status.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

// Agent interaction: the caller's own agent only (userId is always the session's, never the
// client's). docs/decisions/0080-agent-interaction.md

const getQuery = z.object({
  action: z.enum(["health", "sessions", "session", "memory", "skills", "credentials"]).optional(),
  sessionId: z.string().max(300).optional(),
});

const postBody = z.object({
  action: z.enum(["chat", "create-session", "update-skill", "set-credential"]).optional(),
  message: z.string().max(32_000).optional(),
  sessionId: z.string().max(300).optional(),
  skillId: z.string().max(200).optional(),
  enabled: z.boolean().optional(),
  key: z.string().optional(),
  value: z.string().max(4096).optional(),
});

const missing = (field: string) => new DomainError(400, `${field} is required`);

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Read the agent: health, sessions, a session, memory, skills, credentials",
    description:
      "Without `action`: the API's versions and endpoints. 404 when the session is unknown or the user has no instance; 502 when the gateway does not answer.",
    auth: "user",
    permission: "agents.read",
    query: getQuery,
    handler: async ({ auth, query }) => {
      const userId = auth.user.id;
      switch (query.action) {
        case undefined:
          return describeApi();
        case "health":
          return health(userId);
        case "sessions":
          return listSessions(userId);
        case "session":
          if (!query.sessionId) throw missing("sessionId");
          return getSession(userId, query.sessionId);
        case "memory":
          return memory(userId);
        case "skills":
          return listSkills(userId);
        case "credentials":
          return credentials(userId);
      }
    },
  }),
  POST: endpoint({
    summary: "Talk to the agent: chat, create a session, toggle a skill, set a credential",
    description:
      "`chat` (default): message required, sessionId optional (the active session, or a new one). AI provider keys become the user's own keys in the AI layer; channel tokens are sealed and applied to the gateway.",
    auth: "user",
    permission: "agents.chat",
    rateLimit: "chat",
    body: postBody,
    handler: async ({ auth, body }) => {
      const userId = auth.user.id;
      switch (body.action ?? "chat") {
        case "chat": {
          const message = body.message?.trim();
          if (!message) throw missing("message");
          return chat(
            userId,
            { message, ...(body.sessionId ? { sessionId: body.sessionId } : {}) },
            {},
            { personId: auth.person.id },
          );
        }
        case "create-session":
          return createSession(userId);
        case "update-skill":
          if (!body.skillId) throw missing("skillId");
          if (body.enabled === undefined) throw missing("enabled");
          return updateSkill(userId, body.skillId, body.enabled);
        default: {
          if (!body.key) throw missing("key");
          const key = CREDENTIAL_KEYS.find((k) => k === body.key);
          if (!key) {
            throw new DomainError(400, `key must be one of: ${CREDENTIAL_KEYS.join(", ")}`);
          }
          if (!body.value) throw missing("value");
          return setCredential(userId, key, body.value);
        }
      }
    },
  }),
});
