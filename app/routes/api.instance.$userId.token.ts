import { instanceParams, readInstanceToken } from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The instance's gateway token",
    description: "Generates one (and the instance record) when none exists. 500 on failure.",
    // AUTH: becomes auth: "user" with the accounts branch; :userId ≠ the session's user → 404.
    auth: "none",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params }) => readInstanceToken(params.userId),
  }),
});
