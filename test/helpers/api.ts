import type { AppLoadContext } from "@remix-run/node";

type Handler = (args: {
  request: Request;
  params: Record<string, string | undefined>;
  context: AppLoadContext;
}) => Promise<Response>;

export interface RouteModule {
  loader: Handler;
  action: Handler;
}

export interface CallOptions {
  method?: string;
  params?: Record<string, string>;
  body?: unknown;
  rawBody?: string | Uint8Array;
  headers?: Record<string, string>;
  remoteAddress?: string;
  context?: AppLoadContext;
}

export interface CallResult {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
  json: any;
  text: string;
}

/** Calls a route module's loader or action the way the server entry does. */
export async function call(
  module: RouteModule,
  path: string,
  opts: CallOptions = {},
): Promise<CallResult> {
  const method = opts.method ?? "GET";
  const headers = new Headers(opts.headers);
  let body: BodyInit | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody as BodyInit;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
  }
  const request = new Request(new URL(path, "http://localhost"), { method, headers, body });
  const fn = method === "GET" || method === "HEAD" ? module.loader : module.action;
  const response = await fn({
    request,
    params: opts.params ?? {},
    context: { remoteAddress: opts.remoteAddress ?? "127.0.0.1", ...opts.context },
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, json, text };
}
