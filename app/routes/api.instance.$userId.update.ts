import { instanceParams, updateInstanceImage } from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Update the instance's gateway image",
    description:
      'Accepts the update (a job recreates the container on the newest image, keeping the state volume, and rolls back when the new gateway is not healthy); GET shows its progress. 502 {success:false,status:"error"} when Docker or the gateway does not answer, 500 likewise on other failures, 404 when the user has no instance.',
    // AUTH: becomes auth: "user" with the accounts branch; :userId ≠ the session's user → 404.
    auth: "none",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params }) => updateInstanceImage(params.userId),
  }),
});
