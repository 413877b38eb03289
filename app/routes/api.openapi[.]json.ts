import type { ServerBuild } from "@remix-run/node";
import { apiDocument, apiRoute, endpoint } from "../server/api.server.ts";

let cached: { build: unknown; doc: unknown } | undefined;

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "This API's OpenAPI 3.1 document",
    auth: "none",
    handler: ({ context }) => {
      const build = context.build as ServerBuild | undefined;
      if (!build) throw new Error("server build missing from the load context");
      if (cached?.build !== build) cached = { build, doc: apiDocument(build.routes) };
      return cached.doc;
    },
  }),
});
