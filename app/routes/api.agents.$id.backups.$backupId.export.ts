import { exportBackup } from "../server/agents/agent-archive.server.ts";
import { backupParams } from "../server/agents/backups.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Export a backup as a portable, versioned archive signed by this platform",
    description:
      "A tar of manifest.json (format, version, payload size and sha256, signer's Ed25519 key), manifest.sig and payload.tar (the backup's records and state). Import it with POST /api/agents/:id/import here or on a platform that trusts this one's key. 409 when the backup is not ready.",
    auth: "user",
    permission: "agents.operate",
    rateLimit: "agents",
    params: backupParams,
    handler: ({ auth, params }) => exportBackup(auth.user.id, params.id, params.backupId),
  }),
});
