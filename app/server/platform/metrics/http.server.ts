import { FastCounter, FastHistogram } from "./fast.server.ts";
import { PREFIX, registry } from "./registry.server.ts";

// HTTP requests by route template, method and status class. The hot path pays one label lookup
// per request at most once per (route, method, class): each route's children are kept in a
// small array, and they add to plain numbers (fast.server.ts).

const LABELS = ["route", "method", "status_class"] as const;

const requests = new FastCounter({
  name: `${PREFIX}http_requests_total`,
  help: "HTTP requests answered, by route template, method and status class",
  labelNames: LABELS,
  registers: [registry],
});

const duration = new FastHistogram({
  name: `${PREFIX}http_request_duration_seconds`,
  help: "Time from a request's arrival until its answer was handed to the socket",
  labelNames: LABELS,
  buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  registers: [registry],
});

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"] as const;
const CLASSES = ["1xx", "2xx", "3xx", "4xx", "5xx"] as const;

function methodIndex(method: string | undefined): number {
  const i = METHODS.indexOf(method as (typeof METHODS)[number]);
  return i === -1 ? METHODS.length - 1 : i;
}

interface Children {
  count: { inc(): void };
  time: { observe(value: number): void };
}

/** One route template's metric children, made as they are first needed. */
export class HttpRouteMetrics {
  private readonly children: (Children | undefined)[] = [];
  readonly route: string;
  constructor(route: string) {
    this.route = route;
  }

  record(method: string | undefined, status: number, seconds: number): void {
    const m = methodIndex(method);
    const c = Math.min(Math.max(Math.floor(status / 100), 1), 5) - 1;
    const slot = m * CLASSES.length + c;
    let children = this.children[slot];
    if (!children) {
      const labels = { route: this.route, method: METHODS[m]!, status_class: CLASSES[c]! };
      children = { count: requests.child(labels), time: duration.child(labels) };
      this.children[slot] = children;
    }
    children.count.inc();
    children.time.observe(seconds);
  }
}

const routes = new Map<string, HttpRouteMetrics>();

/** The metrics of a route template (`/api/agents/:id`), or of a fixed class (`static`, `page`). */
export function httpRoute(template: string): HttpRouteMetrics {
  let route = routes.get(template);
  if (!route) {
    route = new HttpRouteMetrics(template);
    routes.set(template, route);
  }
  return route;
}

/** Requests that no route template names: bounded classes instead of their paths. */
export const HTTP_STATIC = httpRoute("static");
export const HTTP_PAGE = httpRoute("page");
export const HTTP_API_OTHER = httpRoute("/api (other)");
export const HTTP_METRICS = httpRoute("/metrics");
