import { paging, parseFilter } from "../server/scim/filter.server.ts";
import { parseScim, scimResponse, scimRoute } from "../server/scim/http.server.ts";
import { draftOf, scimUserSchema } from "../server/scim/user-input.server.ts";
import { createScimUser, listScimUsers } from "../server/scim/users.server.ts";

// SCIM Users: list (filter `userName eq "…"`, startIndex, count) and create. docs/scim.md
export const { loader, action } = scimRoute({
  GET: async ({ organisationId, url }) => {
    const filter = parseFilter(url.searchParams.get("filter"), [
      "userName",
      "externalId",
      "emails.value",
    ]);
    const { startIndex, count } = paging(url);
    return scimResponse(200, await listScimUsers(organisationId, filter, startIndex, count));
  },
  POST: async ({ organisationId, body }) => {
    const user = await createScimUser(organisationId, draftOf(parseScim(scimUserSchema, body)));
    return scimResponse(201, user, { location: user.meta.location });
  },
});
