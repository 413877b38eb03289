import type { AppLoadContext, ServerBuild } from "@remix-run/node";
import { API_ROUTE, type ApiHandler } from "../http.server.ts";

// Remix's request handler flattens and re-ranks every route path on each request, which costs
// more than most /api handlers themselves (see docs/decisions/0002-api-fast-path.md). /api
// resource routes built with `apiRoute` are self-contained — they parse, authorise and answer
// every error themselves — so the server entry calls them directly through this table, compiled
// once per build. Page routes and anything this table does not know go through Remix.

interface CompiledRoute {
  handler: ApiHandler;
  pattern: RegExp;
  names: string[];
  /** Lower ranks first: static segments beat params, params beat a splat. */
  rank: number[];
}

export type ApiMatch = { handler: ApiHandler; params: Record<string, string> };

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
  return { handler, pattern: new RegExp(`^${source}/?$`, "i"), names, rank };
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
  return (pathname) => {
    for (const route of table) {
      const m = route.pattern.exec(pathname);
      if (!m) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => {
        const value = m[i + 1];
        if (value !== undefined) params[name] = safeDecode(value);
      });
      return { handler: route.handler, params };
    }
    return undefined;
  };
}

export type { AppLoadContext };
