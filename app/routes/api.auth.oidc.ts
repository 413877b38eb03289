import { oidcStart } from "../server/accounts/oidc-endpoint.server.ts";
import { apiRoute } from "../server/api.server.ts";

export const { loader, action } = apiRoute({ GET: oidcStart });
