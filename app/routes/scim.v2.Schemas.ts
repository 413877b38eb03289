import { listResponse } from "../server/scim/filter.server.ts";
import { scimResponse, scimRoute } from "../server/scim/http.server.ts";
import { schemas } from "../server/scim/schema.server.ts";

export const { loader, action } = scimRoute({
  GET: async () => {
    const all = schemas();
    return scimResponse(200, listResponse(all, all.length, 1));
  },
});
