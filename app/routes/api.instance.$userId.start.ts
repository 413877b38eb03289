import { instanceParams, ownUserId, startInstance } from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Start the user's instance",
    description:
      'Runs the start through the worker and waits for it. 502 {success:false,status:"error"} when Docker, the gateway or the worker does not answer (a worker that died mid-action included), 500 likewise on other failures, 503 {error} while the database is unavailable, 404 when the user has no instance.',
    auth: "user",
    permission: "agents.operate",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params, auth }) => startInstance(ownUserId(params.userId, auth.user.id)),
  }),
});
