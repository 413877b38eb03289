import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { env } from "../env.server.ts";
import { logger } from "../logger.server.ts";
import { registry } from "./registry.server.ts";

// GET /metrics: the registry in Prometheus's text format, for whoever holds METRICS_TOKEN.
// Unset, the path does not exist (404); a missing or wrong token is 401. The same answer on the
// web's port and on a worker's own listener.

const digest = (value: string) => createHash("sha256").update(value).digest();

/** Constant time whatever the lengths: both sides are hashed to 32 bytes first. */
function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

export function isMetricsPath(url: string | undefined): boolean {
  return url === "/metrics" || url?.startsWith("/metrics?") === true;
}

export interface MetricsAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const jsonError = (status: number, error: string, extra: Record<string, string> = {}) => ({
  status,
  headers: {
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
    ...extra,
  },
  body: JSON.stringify({ error }),
});

/** The answer to a /metrics request with this method and Authorization header. */
export async function metricsAnswer(
  method: string | undefined,
  authorization: string | undefined,
): Promise<MetricsAnswer> {
  const token = env().METRICS_TOKEN;
  if (!token) return jsonError(404, "Not found");
  if (method !== "GET" && method !== "HEAD") {
    return jsonError(405, `Method ${method} not allowed`, { allow: "GET, HEAD" });
  }
  const given = authorization?.startsWith("Bearer ") ? authorization.slice(7).trim() : undefined;
  if (!given || !tokenMatches(given, token)) {
    return jsonError(401, "Missing or invalid metrics token", { "www-authenticate": "Bearer" });
  }
  try {
    return {
      status: 200,
      headers: { "content-type": registry.contentType, "cache-control": "no-store" },
      body: await registry.metrics(),
    };
  } catch (error) {
    logger().error({ err: error }, "metrics collection failed");
    return jsonError(500, "Internal server error");
  }
}

/** Writes the /metrics answer to a node:http response. */
export async function serveMetrics(
  req: IncomingMessage,
  res: ServerResponse,
  headers: Readonly<Record<string, string>> = {},
): Promise<void> {
  const answer = await metricsAnswer(req.method, req.headers.authorization);
  res.writeHead(answer.status, { ...headers, ...answer.headers });
  res.end(req.method === "HEAD" ? undefined : answer.body);
}
