import { scimResponse, scimRoute } from "../server/scim/http.server.ts";
import { serviceProviderConfig } from "../server/scim/schema.server.ts";

// SCIM 2.0 (RFC 7644 §4): what this service supports. docs/scim.md
export const { loader, action } = scimRoute({
  GET: async () => scimResponse(200, serviceProviderConfig()),
});
