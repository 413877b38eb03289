import {
  getHeartbeat,
  heartbeatUpdateSchema,
  resetHeartbeat,
  updateHeartbeat,
} from "../server/agents/heartbeat.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

// Heartbeat settings of the caller's instance (OpenClaw's periodic agent turn, all their
// agents): docs/decisions/0091-heartbeat-and-memory-endpoints.md

const errors =
  "404 when the user has no instance; 502 when the gateway does not answer (a stopped instance).";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Read the heartbeat settings of your instance",
    description: `\`{heartbeat: {enabled, every, prompt, activeHours, target, lightContext, isolatedSession, timeoutSeconds}, configured}\`: OpenClaw's defaults filled in, and exactly what the gateway holds. ${errors}`,
    auth: "user",
    permission: "agents.read",
    rateLimit: "instance",
    handler: ({ auth }) => getHeartbeat(auth.user.id),
  }),
  POST: endpoint({
    summary: "Change heartbeat settings",
    description: `Only the fields sent change; null resets one to OpenClaw's default. \`enabled: false\` sets every to 0m. every: 5m–24h. Answers like GET. 400 for unknown fields or invalid values. ${errors}`,
    auth: "user",
    permission: "agents.configure",
    rateLimit: "instance",
    body: heartbeatUpdateSchema,
    handler: ({ auth, body }) => updateHeartbeat(auth.user.id, body),
  }),
  DELETE: endpoint({
    summary: "Reset heartbeat settings to OpenClaw's defaults",
    description: `Removes every heartbeat setting from the gateway's config. Answers like GET. ${errors}`,
    auth: "user",
    permission: "agents.configure",
    rateLimit: "instance",
    handler: ({ auth }) => resetHeartbeat(auth.user.id),
  }),
});
