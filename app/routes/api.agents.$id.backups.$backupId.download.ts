import { backupParams, downloadBackup } from "../server/agents/backups.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Download a backup, decrypted: a tar of records.json and the state volume (state/)",
    description: "409 when the backup is not ready or its stored bytes fail their checksum.",
    auth: "user",
    permission: "agents.operate",
    rateLimit: "agents",
    params: backupParams,
    handler: ({ auth, params }) => downloadBackup(auth.user.id, params.id, params.backupId),
  }),
});
