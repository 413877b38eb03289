// One local address (issue 25): `npm start` prints APP_URL, mail links and the SIWE/WebAuthn
// domain use it, so a page opened on another local name for the same server (127.0.0.1 when
// APP_URL says localhost) would sign nobody in. Such page requests are sent to APP_URL's origin:
// a GET or HEAD is redirected, a form post is answered with a page that says where to go (its
// body cannot follow a redirect). /api is left alone: API clients name the address they mean.

const LOOPBACK_V4 = /^127(?:\.\d{1,3}){3}$/;

/** localhost, *.localhost, 127.0.0.0/8, [::1] and 0.0.0.0: names of this machine only. */
export function isLocalName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, "");
  return (
    h === "localhost" ||
    h.endsWith(".localhost") ||
    LOOPBACK_V4.test(h) ||
    h === "[::1]" ||
    h === "::1" ||
    h === "0.0.0.0"
  );
}

function defaultPort(protocol: string): string {
  return protocol === "https:" ? "443" : "80";
}

/**
 * APP_URL's origin when `hostHeader` is another local name for this server (both local, the same
 * port, a different host); undefined otherwise (APP_URL public, or the request already on it).
 */
export function canonicalOriginFor(
  hostHeader: string | undefined,
  appUrl: string,
): string | undefined {
  if (!hostHeader) return undefined;
  const app = new URL(appUrl);
  if (!isLocalName(app.hostname)) return undefined;
  let requested: URL;
  try {
    requested = new URL(`${app.protocol}//${hostHeader}`);
  } catch {
    return undefined;
  }
  if (!isLocalName(requested.hostname)) return undefined;
  if (requested.host === app.host) return undefined;
  const appPort = app.port || defaultPort(app.protocol);
  const requestedPort = requested.port || defaultPort(app.protocol);
  return appPort === requestedPort ? app.origin : undefined;
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );

/** The page a form post on the wrong local name gets (421 Misdirected Request). */
export function wrongAddressPage(
  requestedHost: string,
  target: string,
  stylesheet: string | undefined,
): string {
  const css = stylesheet ? `<link rel="stylesheet" href="${escapeHtml(stylesheet)}">` : "";
  const here = escapeHtml(requestedHost);
  const there = escapeHtml(target);
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Open this site at its own address — Agent Platform</title>${css}</head>
<body class="bg-slate-50 text-slate-900"><main class="mx-auto w-full max-w-5xl space-y-4 px-4 py-10">
<h1 class="text-2xl font-semibold">Open this site at its own address</h1>
<p class="text-slate-700">You sent this form to ${here}, but this server's address is <strong>${there}</strong>. Sign-in, security keys and links in mail only work there, so nothing was processed.</p>
<p><a href="${there}" class="text-indigo-700 underline">Go to ${there}</a> and send the form again.</p>
</main></body></html>
`;
}
