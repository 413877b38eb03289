import { paging, parseFilter } from "../server/scim/filter.server.ts";
import { createScimGroup, listScimGroups, scimGroupSchema } from "../server/scim/groups.server.ts";
import { parseScim, scimResponse, scimRoute } from "../server/scim/http.server.ts";

// SCIM Groups: list (filter `displayName eq "…"`) and create. docs/scim.md
export const { loader, action } = scimRoute({
  GET: async ({ organisationId, url }) => {
    const filter = parseFilter(url.searchParams.get("filter"), ["displayName", "externalId"]);
    const { startIndex, count } = paging(url);
    return scimResponse(200, await listScimGroups(organisationId, filter, startIndex, count));
  },
  POST: async ({ organisationId, body }) => {
    const group = await createScimGroup(organisationId, parseScim(scimGroupSchema, body));
    return scimResponse(201, group, { location: group.meta.location });
  },
});
