import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from "node:http";
import type { IngressVerdict } from "./ingress-types.server.ts";

// Which headers cross the ingress, each way. The gateway is treated as hostile: what it answers
// runs under the platform's or the agent's own origin, so only harmless headers pass through,
// and the authority's own headers (its CSP sandbox, nosniff, no framing) replace any of the
// same name the gateway sent.

// Connection-level and proxy-level headers the gateway must not see; `cookie` and
// `authorization` carry the platform's credentials, which stay on the platform's side.
export const DROP_REQUEST = new Set([
  "connection",
  "keep-alive",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "cookie",
  "authorization",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "x-real-ip",
  "forwarded",
]);
export const DROP_RESPONSE = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "trailer",
  "transfer-encoding",
  "upgrade",
  // The gateway sets no cookies on a host the platform signs people in on.
  "set-cookie",
  // Nor widens what a service worker of its pages may control (the path form's is the
  // platform's whole origin), clears the origin's data, or opens its answers to other sites.
  "service-worker-allowed",
  "clear-site-data",
  "access-control-allow-origin",
  "access-control-allow-credentials",
  "access-control-allow-headers",
  "access-control-allow-methods",
  "access-control-expose-headers",
]);
// Headers the ws client sets itself for the upgrade it makes to the gateway.
export const WS_OWN = new Set([
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-extensions",
  "sec-websocket-protocol",
  "host",
  "content-length",
]);

export function forwardHeaders(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
  drop: Set<string>,
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const named = new Set(
    String(headers.connection ?? "")
      .split(",")
      .map((h) => h.trim().toLowerCase()),
  );
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || drop.has(name) || named.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/**
 * What the gateway learns from the proxy: the authority's headers only. No X-Forwarded-*: a
 * gateway that does not list the web among its trusted proxies refuses authenticated requests
 * carrying them (OpenClaw's "unattributable proxy"), and the visitor's copies are dropped.
 */
export function proxyHeaders(
  _req: IncomingMessage,
  verdict: Extract<IngressVerdict, { kind: "proxy" }>,
): Record<string, string> {
  return { ...verdict.upstreamHeaders };
}

export function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  return [address.slice(0, i).replace(/^\[|\]$/g, ""), Number(address.slice(i + 1))];
}

/**
 * The gateway's answer headers (already filtered) under the authority's: a name the authority
 * sets replaces the gateway's, whatever its case (Node would send both spellings).
 */
export function answerHeaders(
  gateway: OutgoingHttpHeaders,
  platform: OutgoingHttpHeaders = {},
): OutgoingHttpHeaders {
  const replaced = new Set(Object.keys(platform).map((name) => name.toLowerCase()));
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(gateway)) {
    if (!replaced.has(name.toLowerCase())) out[name] = value;
  }
  return { ...out, ...platform };
}
