import type { ServerBuild } from "@remix-run/node";
import { describe, expect, it } from "vitest";
import { apiRoute, endpoint } from "../../app/server/api.server.ts";
import { compileApiRoutes } from "../../app/server/platform/web/api-dispatch.server.ts";

const route = (name: string) =>
  apiRoute({ GET: endpoint({ summary: name, auth: "none", handler: () => ({ name }) }) });

function fakeBuild(paths: Record<string, string>): ServerBuild {
  const routes: Record<string, unknown> = { root: { id: "root", path: "", module: {} } };
  for (const [id, path] of Object.entries(paths)) {
    routes[id] = { id, parentId: "root", path, module: route(id) };
  }
  routes.page = { id: "page", parentId: "root", path: "agents", module: { default: () => null } };
  return { routes } as unknown as ServerBuild;
}

describe("the /api fast-path table", () => {
  const match = compileApiRoutes(
    fakeBuild({
      splat: "api/*",
      byId: "api/agents/:id",
      provision: "api/agents/provision",
      stats: "api/agents/:id/stats",
      health: "api/health",
    }),
  );
  const name = (p: string) => {
    const m = match(p);
    return (
      m && {
        id: (m.handler as unknown as { [k: symbol]: { GET: { summary: string } } })[
          Symbol.for("agent-platform.api-route")
        ]?.GET.summary,
        params: m.params,
      }
    );
  };

  it("prefers static segments over params and params over the splat", () => {
    expect(name("/api/agents/provision")).toEqual({ id: "provision", params: {} });
    expect(name("/api/agents/agt_1")).toEqual({ id: "byId", params: { id: "agt_1" } });
    expect(name("/api/agents/agt_1/stats")).toEqual({ id: "stats", params: { id: "agt_1" } });
    expect(name("/api/nope/deeper")).toEqual({ id: "splat", params: { "*": "nope/deeper" } });
  });

  it("decodes params and tolerates a trailing slash and malformed escapes", () => {
    expect(name("/api/agents/a%20b/")?.params).toEqual({ id: "a b" });
    expect(name("/api/agents/%E0%A4%A")?.params).toEqual({ id: "%E0%A4%A" });
  });

  it("answers through its indexes exactly what a scan in rank order answers", () => {
    // The exact-path index: any case, one trailing slash.
    expect(name("/API/Health/")).toEqual({ id: "health", params: {} });
    expect(name("/api/agents/PROVISION")).toEqual({ id: "provision", params: {} });
    // The first-two-segments index still ranks a param route over the splat.
    expect(name("/api/Agents/agt_1/stats/")).toEqual({ id: "stats", params: { id: "agt_1" } });
    expect(name("/api/agents/agt_1/other")).toEqual({
      id: "splat",
      params: { "*": "agents/agt_1/other" },
    });
    expect(name("/api//health")).toEqual({ id: "splat", params: { "*": "/health" } });
    expect(name("/api")).toEqual({ id: "splat", params: {} });
  });

  it("leaves page routes to Remix", () => {
    expect(match("/agents")).toBeUndefined();
  });
});
