import { backupParams, deleteBackup } from "../server/agents/backups.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  DELETE: endpoint({
    summary: "Delete one of the agent's backups",
    auth: "user",
    permission: "agents.operate",
    rateLimit: "agents",
    params: backupParams,
    handler: ({ auth, params }) => deleteBackup(auth.user.id, params.id, params.backupId),
  }),
});
