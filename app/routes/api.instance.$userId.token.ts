import { instanceParams, ownUserId, readInstanceToken } from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The instance's gateway token",
    description: "Generates one (and the instance record) when none exists. 500 on failure.",
    auth: "user",
    permission: "credentials.manage",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params, auth }) => readInstanceToken(ownUserId(params.userId, auth.user.id)),
  }),
});
