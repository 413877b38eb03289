import { instanceParams, ownUserId, readInstanceStats } from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Live figures of the user's instance",
    description:
      "From the samples the worker records every few seconds. 404 when the user has no instance.",
    auth: "user",
    permission: "agents.read",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params, auth }) => readInstanceStats(ownUserId(params.userId, auth.user.id)),
  }),
});
