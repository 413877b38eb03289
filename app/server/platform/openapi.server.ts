import { z } from "zod";
import { type AnyEndpoint, API_ROUTE, type ApiRoute } from "./http.server.ts";
import { platformVersion } from "./version.server.ts";

// GET /api/openapi.json is generated from the same zod schemas the route builder validates
// with, so the document cannot drift from what the routes accept.

export interface RouteEntry {
  id: string;
  path?: string | undefined;
  parentId?: string | undefined;
  module: { loader?: unknown };
}

const toSchema = (schema: z.ZodType) =>
  z.toJSONSchema(schema, { target: "draft-2020-12", io: "input", unrepresentable: "any" }) as {
    properties?: Record<string, unknown>;
    required?: string[];
  };

function fullPath(routes: Record<string, RouteEntry | undefined>, id: string): string {
  const parts: string[] = [];
  for (let r = routes[id]; r; r = r.parentId ? routes[r.parentId] : undefined) {
    if (r.path) parts.unshift(r.path);
  }
  return `/${parts.join("/")}`;
}

function parameters(schema: z.ZodType | undefined, where: "path" | "query") {
  if (!schema) return [];
  const json = toSchema(schema);
  return Object.entries(json.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === "path" || (json.required ?? []).includes(name),
    schema: s,
  }));
}

/** How callers prove who they are, as the area that authenticates describes it. */
export interface ApiSecurity<Mode extends string = string> {
  /** OpenAPI security schemes by name. */
  schemes: Record<string, Record<string, string>>;
  /** The requirements of each auth mode (an empty object means "anonymous is fine"). */
  byMode: Record<Mode, Record<string, string[]>[]>;
  /** The document's default requirement. */
  default: Record<string, string[]>[];
}

function operation(spec: AnyEndpoint, security: ApiSecurity) {
  return {
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    parameters: [...parameters(spec.params, "path"), ...parameters(spec.query, "query")],
    ...(spec.body
      ? {
          requestBody: {
            required: true,
            content: { "application/json": { schema: toSchema(spec.body) } },
          },
        }
      : {}),
    responses: {
      [String(spec.status ?? 200)]: { description: "Success", content: { "application/json": {} } },
      default: { $ref: "#/components/responses/Error" },
    },
    security: security.byMode[spec.auth],
    // What a member's role must allow to call it for an organisation (X-Organization);
    // absent: it acts for the caller only.
    ...(spec.permission ? { "x-permission": spec.permission } : {}),
  };
}

export function openApiDocument(
  routes: Record<string, RouteEntry | undefined>,
  security: ApiSecurity,
) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const entry of Object.values(routes)) {
    if (!entry) continue;
    const loader = entry.module.loader as { [API_ROUTE]?: ApiRoute } | undefined;
    const route = loader?.[API_ROUTE];
    if (!route) continue;
    const path = fullPath(routes, entry.id);
    if (path.includes("*")) continue;
    const openApiPath = path.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
    for (const [method, spec] of Object.entries(route)) {
      if (!spec) continue;
      paths[openApiPath] ??= {};
      paths[openApiPath][method.toLowerCase()] = operation(spec, security);
    }
  }
  return {
    openapi: "3.1.0",
    info: { title: "Agent Hosting Platform API", version: platformVersion },
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b))),
    components: {
      securitySchemes: security.schemes,
      responses: {
        Error: {
          description: "Error",
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: { error: { type: "string" } },
                required: ["error"],
              },
            },
          },
        },
      },
    },
    security: security.default,
  };
}
