import {
  instanceParams,
  ownUserId,
  updateInstanceImage,
} from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Update the instance's gateway image",
    description:
      'Accepts the update (a job recreates the container on the newest image, keeping the state volume, and rolls back when the new gateway is not healthy); GET shows its progress. 502 {success:false,status:"error"} when Docker or the gateway does not answer, 500 likewise on other failures, 404 when the user has no instance.',
    auth: "user",
    permission: "agents.operate",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params, auth }) => updateInstanceImage(ownUserId(params.userId, auth.user.id)),
  }),
});
