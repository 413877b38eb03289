import { apiRoute } from "../server/api.server.ts";
import { ssoSamlAcs } from "../server/sso/endpoints.server.ts";

export const { loader, action } = apiRoute({ POST: ssoSamlAcs });
