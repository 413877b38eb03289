import { agentParams } from "../server/agents/agents.server.ts";
import { listBackups, requestBackup } from "../server/agents/backups.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The agent's backups: size, time, reason, status and last restore",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => listBackups(auth.user.id, params.id),
  }),
  POST: endpoint({
    summary: "Take a backup of the agent now",
    description:
      "Accepted (202) with the pending backup; the worker copies the gateway's state volume and the agent's records, encrypted, and the list shows it ready (or failed, with why). 409 when the agent has no instance or a backup is already being taken.",
    auth: "user",
    permission: "agents.operate",
    rateLimit: "instance",
    params: agentParams,
    status: 202,
    handler: ({ auth, params }) => requestBackup(auth.user.id, params.id),
  }),
});
