import { randomBytes } from "node:crypto";

// The security headers of every answer (docs/decisions/0097-security-headers.md). The constant
// set is built once per server; a page adds only its own Content-Security-Policy, whose one
// per-request part is the script nonce.

/** Headers every answer carries: API JSON, redirects, static files, pages (whose CSP wins). */
export function constantSecurityHeaders(appUrl: string): Readonly<Record<string, string>> {
  const headers: Record<string, string> = {
    // An answer that is not a page loads nothing and is framed by nobody.
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "strict-origin-when-cross-origin",
    // For browsers that predate frame-ancestors.
    "x-frame-options": "DENY",
  };
  // Only when the public origin is https: HSTS on a plain-http origin would be ignored at best.
  // No includeSubDomains: agents' own sites may live on subdomains the platform does not serve.
  if (new URL(appUrl).protocol === "https:") {
    headers["strict-transport-security"] = "max-age=31536000";
  }
  return Object.freeze(headers);
}

/** A fresh script nonce for one page answer (128 bits from the OS CSPRNG). */
export const newCspNonce = (): string => randomBytes(16).toString("base64");

export interface PagePolicyOptions {
  /** Origins (CSP source expressions) media is played and fetched from, e.g. a live stream's. */
  mediaSources?: readonly string[];
}

/**
 * The policy of an HTML page: the app's own scripts, styles and chunks, inline scripts only with
 * this answer's nonce (Remix's hydration data, scroll restoration, React's streaming), no inline
 * styles. Built once; each page only splices in its nonce.
 */
export function pagePolicy({
  mediaSources = [],
}: PagePolicyOptions = {}): (nonce: string) => string {
  const media = mediaSources.join(" ");
  const head = "default-src 'self'; script-src 'self' 'nonce-";
  const tail = [
    "'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    // 'self' covers the same-origin WebSocket (the live agent socket) too.
    `connect-src 'self' ${media}`.trimEnd(),
    // hls.js plays through Media Source (blob: URLs) and transmuxes in a blob: worker.
    `media-src 'self' blob: ${media}`.trimEnd(),
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return (nonce) => head + nonce + tail;
}

/** The policy of the server's own small HTML answers (no script): only our stylesheet. */
export const STATIC_PAGE_POLICY =
  "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
