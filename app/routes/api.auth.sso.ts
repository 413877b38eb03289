import { apiRoute } from "../server/api.server.ts";
import { ssoLookup } from "../server/sso/endpoints.server.ts";

export const { loader, action } = apiRoute({ GET: ssoLookup });
