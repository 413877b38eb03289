import {
  deleteScimGroup,
  getScimGroup,
  patchScimGroup,
  replaceScimGroup,
  scimGroupSchema,
} from "../server/scim/groups.server.ts";
import { parseScim, scimResponse, scimRoute } from "../server/scim/http.server.ts";
import { patchSchema } from "../server/scim/user-input.server.ts";

// One SCIM Group: get, replace (PUT), PATCH (members, displayName), DELETE. docs/scim.md
export const { loader, action } = scimRoute({
  GET: async ({ organisationId, params }) =>
    scimResponse(200, await getScimGroup(organisationId, params.id ?? "")),
  PUT: async ({ organisationId, params, body }) =>
    scimResponse(
      200,
      await replaceScimGroup(organisationId, params.id ?? "", parseScim(scimGroupSchema, body)),
    ),
  PATCH: async ({ organisationId, params, body }) => {
    const { Operations } = parseScim(patchSchema, body);
    return scimResponse(200, await patchScimGroup(organisationId, params.id ?? "", Operations));
  },
  DELETE: async ({ organisationId, params }) => {
    await deleteScimGroup(organisationId, params.id ?? "");
    return scimResponse(204, undefined);
  },
});
