import { apiRoute, endpoint } from "../server/api.server.ts";
import { errorResponse, type Method } from "../server/platform/http.server.ts";

// Every /api path no other route claims: a JSON 404 for any method.
const notFound = endpoint({
  summary: "Unknown API path",
  auth: "none",
  handler: ({ request }) =>
    errorResponse(404, `No API endpoint at ${new URL(request.url).pathname}`),
});

const methods: Method[] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
export const { loader, action } = apiRoute(Object.fromEntries(methods.map((m) => [m, notFound])));
