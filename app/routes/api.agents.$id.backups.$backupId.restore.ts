import { backupParams, requestRestore } from "../server/agents/backups.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Restore the agent's gateway to this backup",
    description:
      "The backup's state goes into a fresh volume and the gateway is booted and verified on it before the old state is discarded. 200 when restored; 409 with why when it failed (the agent is as it was); 202 when it is still running after the wait (the list shows the outcome).",
    auth: "user",
    permission: "agents.operate",
    rateLimit: "instance",
    params: backupParams,
    handler: ({ auth, params }) => requestRestore(auth.user.id, params.id, params.backupId),
  }),
});
