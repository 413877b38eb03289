import { instanceParams, startInstance } from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Start the user's instance",
    description:
      'Runs the start through the worker and waits for it. 502 {success:false,status:"error"} when Docker or the gateway does not answer, 500 likewise on other failures, 404 when the user has no instance.',
    // AUTH: becomes auth: "user" with the accounts branch; :userId ≠ the session's user → 404.
    auth: "none",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params }) => startInstance(params.userId),
  }),
});
