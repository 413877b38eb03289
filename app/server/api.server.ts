import { type AuthByMode, authorize, authSecurity } from "./accounts/auth.server.ts";
import { createApiBuilder } from "./platform/http.server.ts";
import { openApiDocument, type RouteEntry } from "./platform/openapi.server.ts";

// The app's API: the platform's route builder and OpenAPI generator with the accounts area's
// authentication bound in. The platform knows no area, so the app wires them here, once; /api
// route modules import `apiRoute` and `endpoint` from this module.

export const { apiRoute, endpoint } = createApiBuilder<AuthByMode>(authorize);

/** GET /api/openapi.json of the routes of a build. */
export const apiDocument = (routes: Record<string, RouteEntry | undefined>) =>
  openApiDocument(routes, authSecurity);
