import { apiDocument } from "../../app/server/api.server.ts";

/** The OpenAPI paths of these route modules, keyed by their Remix path (`api/agents/:id`). */
export function openApiPaths(modules: Record<string, unknown>) {
  const doc = apiDocument({
    root: { id: "root", path: "", module: {} },
    ...Object.fromEntries(
      Object.entries(modules).map(([path, module]) => [
        path,
        { id: path, parentId: "root", path, module: module as never },
      ]),
    ),
  });
  // biome-ignore lint/suspicious/noExplicitAny: reading a generated JSON document
  return doc.paths as Record<string, Record<string, any>>;
}
