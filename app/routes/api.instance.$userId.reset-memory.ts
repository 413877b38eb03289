import {
  instanceParams,
  ownUserId,
  resetInstanceMemory,
} from "../server/agents/instances.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Reset the instance's memory",
    description:
      'Clears the agents\' sessions and memory file through the gateway. 502 {success:false,status:"error"} when Docker or the gateway does not answer, 500 likewise on other failures, 404 when the user has no instance.',
    auth: "user",
    permission: "agents.configure",
    rateLimit: "instance",
    params: instanceParams,
    handler: ({ params, auth }) => resetInstanceMemory(ownUserId(params.userId, auth.user.id)),
  }),
});
