import type { AppLoadContext, ServerBuild } from "@remix-run/node";
import { API_ROUTE, type ApiHandler } from "../http.server.ts";
import { type HttpRouteMetrics, httpRoute } from "../metrics/http.server.ts";

// Remix's request handler flattens and re-ranks every route path on each request, which costs
// more than most /api handlers themselves (see docs/decisions/0002-api-fast-path.md). /api
// resource routes built with `apiRoute` are self-contained — they parse, authorise and answer
// every error themselves — so the server entry calls them directly through this table, compiled
// once per build. Page routes and anything this table does not know go through Remix.

interface CompiledRoute {
  handler: ApiHandler;
  path: string;
  /** Its requests' metrics, labelled with the template (never the concrete path). */
  metrics: HttpRouteMetrics;
  pattern: RegExp;
  names: string[];
  /** Lower ranks first: static segments beat params, params beat a splat. */
  rank: number[];
}

export type ApiMatch = {
  handler: ApiHandler;
  params: Record<string, string>;
  metrics: HttpRouteMetrics;
};

function fullPath(build: ServerBuild, id: string): string {
  const parts: string[] = [];
  for (let r = build.routes[id]; r; r = r.parentId ? build.routes[r.parentId] : undefined) {
    if (r.path) parts.unshift(r.path);
  }
  return `/${parts.join("/")}`;
}

function compile(path: string, handler: ApiHandler): CompiledRoute {
  const names: string[] = [];
  const rank: number[] = [];
  const source = path
    .split("/")
    .filter(Boolean)
    .map((segment) => {
      if (segment === "*") {
        names.push("*");
        rank.push(2);
        return "(?:/(.*))?";
      }
      if (segment.startsWith(":")) {
        names.push(segment.slice(1));
        rank.push(1);
        return "/([^/]+)";
      }
      rank.push(0);
      return `/${segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`;
    })
    .join("");
  return {
    handler,
    path,
    metrics: httpRoute(path),
    pattern: new RegExp(`^${source}/?$`, "i"),
    names,
    rank,
  };
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

function compareRank(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? -1;
    const y = b[i] ?? -1;
    if (x !== y) return x === -1 ? 1 : y === -1 ? -1 : x - y;
  }
  return 0;
}

export function compileApiRoutes(build: ServerBuild): (pathname: string) => ApiMatch | undefined {
  const table: CompiledRoute[] = [];
  for (const route of Object.values(build.routes)) {
    if (!route) continue;
    const loader = route.module.loader as Partial<ApiHandler> | undefined;
    if (!loader?.[API_ROUTE]) continue;
    table.push(compile(fullPath(build, route.id), loader as ApiHandler));
  }
  table.sort((a, b) => compareRank(a.rank, b.rank));
  // Lookups without scanning every pattern (docs/decisions/0150), each giving what the scan in
  // table order gives: a path without params by its exact (lower-case) text, when no route
  // ranked before it matches it too; otherwise only the routes of the path's first two segments
  // (and those with a param in them), still in table order.
  const general = table.filter((r) => prefixOf(r.path, r.rank) === undefined);
  const byPrefix = new Map<string, CompiledRoute[]>();
  for (const route of table) {
    const prefix = prefixOf(route.path, route.rank);
    if (prefix !== undefined && !byPrefix.has(prefix)) {
      byPrefix.set(
        prefix,
        table.filter((r) => {
          const own = prefixOf(r.path, r.rank);
          return own === undefined || own === prefix;
        }),
      );
    }
  }
  const scan = (routes: CompiledRoute[], pathname: string): ApiMatch | undefined => {
    for (const route of routes) {
      const m = route.pattern.exec(pathname);
      if (!m) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => {
        const value = m[i + 1];
        if (value !== undefined) params[name] = safeDecode(value);
      });
      return { handler: route.handler, params, metrics: route.metrics };
    }
    return undefined;
  };
  const exact = new Map<string, CompiledRoute>();
  for (const route of table) {
    if (route.names.length > 0) continue;
    const key = route.path.toLowerCase();
    if (scan(table, key)?.handler === route.handler) exact.set(key, route);
  }
  return (pathname) => {
    const lower = pathname.toLowerCase();
    const key = lower.length > 1 && lower.endsWith("/") ? lower.slice(0, -1) : lower;
    const hit = exact.get(key);
    if (hit) return { handler: hit.handler, params: {}, metrics: hit.metrics };
    return scan(byPrefix.get(prefixOfPath(lower)) ?? general, pathname);
  };
}

/** `/api/agents` of `/api/agents/:id/stats`; undefined when either segment is not static. */
function prefixOf(path: string, rank: number[]): string | undefined {
  if (rank.length < 2 || rank[0] !== 0 || rank[1] !== 0) return undefined;
  return prefixOfPath(path.toLowerCase());
}

/** The first two segments of a path (`/api/agents/x` → `/api/agents`). */
function prefixOfPath(path: string): string {
  const second = path.indexOf("/", 1);
  if (second === -1) return path;
  const third = path.indexOf("/", second + 1);
  return third === -1 ? path : path.slice(0, third);
}

export type { AppLoadContext };
