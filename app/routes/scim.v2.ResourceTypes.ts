import { listResponse } from "../server/scim/filter.server.ts";
import { scimResponse, scimRoute } from "../server/scim/http.server.ts";
import { resourceTypes } from "../server/scim/schema.server.ts";

export const { loader, action } = scimRoute({
  GET: async () => {
    const types = resourceTypes();
    return scimResponse(200, listResponse(types, types.length, 1));
  },
});
