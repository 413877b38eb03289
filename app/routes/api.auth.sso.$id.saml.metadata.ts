import { apiRoute } from "../server/api.server.ts";
import { ssoSamlMetadata } from "../server/sso/endpoints.server.ts";

export const { loader, action } = apiRoute({ GET: ssoSamlMetadata });
