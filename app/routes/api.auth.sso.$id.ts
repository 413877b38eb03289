import { apiRoute } from "../server/api.server.ts";
import { ssoStart } from "../server/sso/endpoints.server.ts";

export const { loader, action } = apiRoute({ GET: ssoStart });
