import { oauthEndpoint } from "../server/accounts/oauth-endpoint.server.ts";
import { apiRoute } from "../server/api.server.ts";

export const { loader, action } = apiRoute({ GET: oauthEndpoint("oauth1") });
