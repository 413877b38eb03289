// Whether a browser says a request comes from another site. Shared by the web server (page
// form posts, before Remix sees them) and the auth check of the API and the live socket.

export interface RequestOrigin {
  /** The Origin header. */
  origin: string | null | undefined;
  /** The host the request was sent to (Host header, or the request URL's host). */
  host: string | null | undefined;
  /** The Sec-Fetch-Site header. */
  secFetchSite: string | null | undefined;
}

/**
 * True for an Origin whose host is neither the public origin's (APP_URL) nor the request's own
 * Host, or (without Origin) a Sec-Fetch-Site of cross-site or same-site. Sibling subdomains
 * (agents' own sites) count as other sites.
 */
export function isCrossSite({ origin, host, secFetchSite }: RequestOrigin, appHost: string) {
  if (origin) {
    if (origin === "null") return true;
    let from: string;
    try {
      from = new URL(origin).host;
    } catch {
      return true;
    }
    return from !== appHost && from !== host;
  }
  return secFetchSite === "cross-site" || secFetchSite === "same-site";
}

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/** Methods that may change state: the ones a cross-site request must not make. */
export const isUnsafeMethod = (method: string | undefined): boolean => !SAFE.has(method ?? "GET");
