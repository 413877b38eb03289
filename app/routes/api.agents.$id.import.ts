import { importArchive } from "../server/agents/agent-archive.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { env } from "../server/platform/env.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Import an exported agent archive into this agent (the archive is the body)",
    description:
      "The archive is checked whole before anything changes: 413 past EXPORT_MAX_BYTES; 400 when it is not an export, of an unknown version, signed by an untrusted platform, altered or truncated. Then it is kept as an `imported` backup and restored (fresh volume, booted and verified): 200 restored, 409 with why when the restore failed (the agent is as it was), 202 when still running.",
    auth: "user",
    permission: "agents.provision",
    rateLimit: "instance",
    params: agentParams,
    // The archive is the body: up to EXPORT_MAX_BYTES, streamed to a file, never held whole.
    maxBodyBytes: () => env().EXPORT_MAX_BYTES,
    handler: ({ auth, params, request }) => importArchive(auth.user.id, params.id, request),
  }),
});
