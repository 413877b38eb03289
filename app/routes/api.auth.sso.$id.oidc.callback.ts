import { apiRoute } from "../server/api.server.ts";
import { ssoOidcCallback } from "../server/sso/endpoints.server.ts";

export const { loader, action } = apiRoute({ GET: ssoOidcCallback });
