import { instanceParams, ownUserId, readInstance } from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The user's instance",
    description:
      "Status is what the worker last observed (Docker inspect + gateway health). 404 when the user has no instance.",
    auth: "user",
    permission: "agents.read",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params, auth }) => readInstance(ownUserId(params.userId, auth.user.id)),
  }),
});
