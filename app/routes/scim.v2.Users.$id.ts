import { parseScim, scimResponse, scimRoute } from "../server/scim/http.server.ts";
import {
  applyUserPatch,
  draftOf,
  patchSchema,
  scimUserSchema,
} from "../server/scim/user-input.server.ts";
import {
  deleteScimUser,
  getScimUser,
  scimUserDraft,
  updateScimUser,
} from "../server/scim/users.server.ts";

// One SCIM User: get, replace (PUT), PATCH (active, name, emails…), DELETE. docs/scim.md
export const { loader, action } = scimRoute({
  GET: async ({ organisationId, params }) =>
    scimResponse(200, await getScimUser(organisationId, params.id ?? "")),
  PUT: async ({ organisationId, params, body }) => {
    const draft = draftOf(parseScim(scimUserSchema, body));
    return scimResponse(200, await updateScimUser(organisationId, params.id ?? "", draft));
  },
  PATCH: async ({ organisationId, params, body }) => {
    const { Operations } = parseScim(patchSchema, body);
    const id = params.id ?? "";
    const draft = applyUserPatch(await scimUserDraft(organisationId, id), Operations);
    return scimResponse(200, await updateScimUser(organisationId, id, draft));
  },
  DELETE: async ({ organisationId, params }) => {
    await deleteScimUser(organisationId, params.id ?? "");
    return scimResponse(204, undefined);
  },
});
