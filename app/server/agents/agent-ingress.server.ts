import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import type { LiveCredential } from "../accounts/credential-watch.server.ts";
import { resolveSession } from "../accounts/sessions.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { randomToken, sha256 } from "../platform/ids.server.ts";
import { safeRedirect } from "../platform/safe-redirect.server.ts";
import type { IngressAuthority, IngressVerdict } from "../platform/web/ingress-proxy.server.ts";
import { isCrossSite, isUnsafeMethod } from "../platform/web/same-origin.server.ts";
import { agentOrigin, agentsDomain, pathFormPrefix } from "./agent-address.server.ts";
import { controlUiSocket, INGRESS_ORIGIN } from "./control-ui-device.server.ts";
import { isControlUiPath } from "./control-ui-paths.server.ts";
import { gatewayTokenOf, getInstanceByUser } from "./instances.server.ts";
import { guardLive } from "./live-access.server.ts";
import { waitWhileStarting } from "./progress.server.ts";
import { touchActivity } from "./sleep.server.ts";
import { wakeIfSleeping } from "./wake.server.ts";

// Who may reach an agent's gateway through the ingress, and where it is
// (docs/decisions/0115-agent-ingress.md). Two forms:
// - host form, <id>.<AGENTS_DOMAIN>: a site of its own. The platform's session cookie is
//   host-only on APP_URL's host and never reaches it; the main origin hands the signed-in user
//   over with a one-time token (60 s, single use, stored hashed) that opens a session cookie for
//   that host only, tied to the platform session (sign-out everywhere ends it too).
// - path form, /agents/<id>/ui/ under APP_URL: installations without wildcard DNS only (with
//   AGENTS_DOMAIN set it answers 404: the gateway's pages would run on the platform's origin);
//   the platform session itself signs the request in.
// Whatever the gateway serves beyond the Control UI's own files comes in a CSP sandbox
// (decision 0200), and every redirect target taken from a request goes through safeRedirect.
// Every request checks that the agent is the signed-in user's (404 otherwise), every open socket
// is checked again while it lasts, and closes at once (4401 "credential revoked") when its
// platform session is revoked or its user suspended (decision 0198).

export const HANDOFF_PATH = "/__ingress/handoff";
export const INGRESS_COOKIE = "__agent_ingress";
/** The signed-in platform user, as the ingress tells the gateway (never taken from the visitor). */
export const IDENTITY_HEADER = "x-platform-user";
const HANDOFF_TTL_SECONDS = 60;
const INGRESS_SESSION_SECONDS = 12 * 60 * 60;
const ID = /^(agt|usr)_[a-z0-9_]{1,64}$/;
const PATH_FORM = /^\/agents\/([^/?#]+)\/ui(\/[^?#]*)?(\?.*)?$/;

// OpenClaw's own app sends its own CSP; these only keep the agent's pages out of frames, from
// leaking the address (the hand-off token is in a URL once) to other sites and from being sniffed
// into another type. Lower case: they replace the gateway's own headers of those names.
const PAGE_HEADERS: OutgoingHttpHeaders = {
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
};
// Anything else the gateway serves (canvas files, media, plugin pages: what the agent or a
// prompt-injected message wrote) opens in an opaque origin with no script (decision 0200).
const SANDBOXED_HEADERS: OutgoingHttpHeaders = {
  ...PAGE_HEADERS,
  "content-security-policy": "sandbox",
};
/** Where the agent's host sends the owner after the hand-off when `next` names nowhere safe. */
const DEFAULT_NEXT = "/";

type Target =
  | { form: "host"; id: string; rest: string; host: string }
  | { form: "path"; id: string; rest: string };

function hostOf(req: IncomingMessage): string {
  return String(req.headers.host ?? "")
    .trim()
    .toLowerCase();
}

/** The agent a request is addressed to, read from its Host or path alone (no I/O). */
export function ingressTargetOf(req: IncomingMessage): Target | undefined {
  const url = req.url ?? "/";
  const domain = agentsDomain();
  if (domain) {
    const host = hostOf(req);
    const name = host.replace(/:\d+$/, "");
    if (name.endsWith(`.${domain}`)) {
      const id = name.slice(0, -domain.length - 1);
      // A host under the agents' domain is never the app: unknown names are the ingress's 404.
      return { form: "host", id, rest: url.startsWith("/") ? url : `/${url}`, host };
    }
  }
  const match = PATH_FORM.exec(url);
  if (!match) return undefined;
  let id: string;
  try {
    id = decodeURIComponent(match[1] as string);
  } catch {
    return undefined;
  }
  return { form: "path", id, rest: `${match[2] ?? ""}${match[3] ?? ""}` };
}

const json = (
  status: number,
  error: string,
  headers: OutgoingHttpHeaders = {},
): IngressVerdict => ({
  kind: "answer",
  status,
  headers: { ...PAGE_HEADERS, ...headers },
  body: JSON.stringify({ error }),
});
const redirect = (location: string, headers: OutgoingHttpHeaders = {}): IngressVerdict => ({
  kind: "answer",
  status: 303,
  headers: { ...PAGE_HEADERS, Location: location, ...headers },
});
const notFound = () => json(404, "Agent not found");

/** The owner of the agent (or instance) an address names, if it exists. */
async function ownerOf(id: string): Promise<string | undefined> {
  if (!ID.test(id)) return undefined;
  if (id.startsWith("usr_")) {
    const [row] = await db()<{ id: string }[]>`select id from users where id = ${id}`;
    return row?.id;
  }
  const [row] = await db()<{ user_id: string }[]>`select user_id from agents where id = ${id}`;
  return row?.user_id;
}

/** Mints the one-time token that signs the user in on the agent's host; the URL to send them to. */
export async function startHandoff(
  sessionId: string,
  userId: string,
  id: string,
  next: string,
): Promise<string | undefined> {
  if ((await ownerOf(id)) !== userId) return undefined;
  const origin = agentOrigin(id);
  const path = safeRedirect(next, DEFAULT_NEXT);
  if (!origin) return `${new URL(env().APP_URL).origin}${pathFormPrefix(id)}${path.slice(1)}`;
  const token = randomToken(32);
  const sql = db();
  // Expired hand-offs are swept as new ones are made: the table stays the size of a minute.
  await sql`delete from agent_ingress_handoffs where expires_at < now() - interval '1 minute'`;
  await sql`
    insert into agent_ingress_handoffs (token_hash, session_id, target_id, next_path, expires_at)
    values (${sha256(token)}, ${sessionId}, ${id}, ${path},
            now() + make_interval(secs => ${HANDOFF_TTL_SECONDS}))`;
  return `${origin}${HANDOFF_PATH}?token=${encodeURIComponent(token)}`;
}

/** The platform session a valid hand-off was minted under; the token is spent either way. */
async function redeemHandoff(
  token: string,
  id: string,
): Promise<{ sessionId: string; next: string } | undefined> {
  const [row] = await db()<{ session_id: string; next_path: string; target_id: string }[]>`
    update agent_ingress_handoffs h set used_at = now()
    from sessions s
    where h.token_hash = ${sha256(token)} and h.used_at is null and h.expires_at > now()
      and s.id = h.session_id and s.revoked_at is null and s.expires_at > now()
    returning h.session_id, h.next_path, h.target_id`;
  if (!row || row.target_id !== id) return undefined;
  return { sessionId: row.session_id, next: row.next_path };
}

function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of String(req.headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

const secure = () => env().APP_URL.startsWith("https:");

/** The signed-in user of a host-form request (its host's own session), and its platform session. */
async function hostSession(
  req: IncomingMessage,
  id: string,
): Promise<{ userId: string; sessionId: string } | undefined> {
  const token = cookieOf(req, INGRESS_COOKIE);
  if (!token) return undefined;
  const [row] = await db()<{ user_id: string; session_id: string }[]>`
    select s.user_id, s.id as session_id
    from agent_ingress_sessions x join sessions s on s.id = x.session_id
    where x.token_hash = ${sha256(token)} and x.target_id = ${id} and x.expires_at > now()
      and s.revoked_at is null and s.expires_at > now()`;
  return row ? { userId: row.user_id, sessionId: row.session_id } : undefined;
}

function requestOf(req: IncomingMessage): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === "string") headers.set(name, value);
    else if (Array.isArray(value)) headers.set(name, value.join(", "));
  }
  return new Request(`${env().APP_URL.replace(/\/$/, "")}${req.url ?? "/"}`, { headers });
}

/**
 * A WebSocket upgrade must come from the agent's own page (cookies ride along on sockets opened
 * by any site, and sibling agents' hosts are same-site); so must any unsafe request.
 */
function sameOrigin(req: IncomingMessage, expected: string, kind: "http" | "upgrade"): boolean {
  const origin = req.headers.origin;
  if (kind === "upgrade" && origin === undefined) return false;
  if (kind === "http" && !isUnsafeMethod(req.method)) return true;
  const host = new URL(expected).host;
  const secFetchSite = req.headers["sec-fetch-site"] as string | undefined;
  return !isCrossSite({ origin, host, secFetchSite }, host);
}

async function gatewayOf(owner: string) {
  const instance = await getInstanceByUser(owner);
  if (!instance?.gateway_address) return undefined;
  return { instanceId: instance.id, address: instance.gateway_address, instance };
}

async function admitHost(
  req: IncomingMessage,
  target: Extract<Target, { form: "host" }>,
  kind: "http" | "upgrade",
): Promise<IngressVerdict> {
  const { id, rest } = target;
  const appOrigin = new URL(env().APP_URL).origin;
  const expected = agentOrigin(id);
  // Only the canonical spelling of the host is served (a forged or odd Host gets nothing).
  if (!expected || !ID.test(id) || `${new URL(expected).host}` !== target.host) return notFound();
  const pathname = rest.split("?")[0];
  if (pathname === HANDOFF_PATH) {
    if (kind === "upgrade" || req.method !== "GET") return json(405, "Method not allowed");
    const token = new URLSearchParams(rest.slice(rest.indexOf("?") + 1)).get("token") ?? "";
    const handoff = token ? await redeemHandoff(token, id) : undefined;
    if (!handoff) return json(403, "This sign-in link is invalid, expired or already used");
    const session = randomToken(32);
    await db()`
      insert into agent_ingress_sessions (token_hash, session_id, target_id, expires_at)
      values (${sha256(session)}, ${handoff.sessionId}, ${id},
              now() + make_interval(secs => ${INGRESS_SESSION_SECONDS}))`;
    const cookie = [
      `${INGRESS_COOKIE}=${session}`,
      "Path=/",
      "HttpOnly",
      "SameSite=Lax",
      `Max-Age=${INGRESS_SESSION_SECONDS}`,
      ...(secure() ? ["Secure"] : []),
    ].join("; ");
    // Checked when stored; checked again here, where it becomes a Location.
    return redirect(safeRedirect(handoff.next, DEFAULT_NEXT), { "Set-Cookie": cookie });
  }
  const session = await hostSession(req, id);
  if (!session) {
    if (kind === "http" && (req.method === "GET" || req.method === "HEAD")) {
      // Sign in on the main origin (if needed) and come back through a fresh hand-off.
      return redirect(
        `${appOrigin}/agents/${encodeURIComponent(id)}/open?next=${encodeURIComponent(rest)}`,
      );
    }
    return json(401, "Sign in first");
  }
  if (!sameOrigin(req, expected, kind)) return json(403, "Cross-site request refused");
  const { userId, sessionId } = session;
  const token = sha256(cookieOf(req, INGRESS_COOKIE) ?? "");
  // The platform session is watched by the guard; the host's own session expires on its own.
  return proxyTo(req, id, { userId, via: "session", sessionId }, rest, kind, async () => {
    const [row] = await db()`
      select 1 from agent_ingress_sessions
      where token_hash = ${token} and target_id = ${id} and expires_at > now()`;
    return row !== undefined;
  });
}

async function admitPath(
  req: IncomingMessage,
  target: Extract<Target, { form: "path" }>,
  kind: "http" | "upgrade",
): Promise<IngressVerdict> {
  const { id } = target;
  let { rest } = target;
  const app = new URL(env().APP_URL);
  if (!rest.startsWith("/")) {
    // The Control UI opens its socket at its base path, without the slash.
    if (kind === "upgrade") rest = `/${rest}`;
    // Relative asset paths need the trailing slash.
    else
      return { kind: "answer", status: 308, headers: { Location: `${pathFormPrefix(id)}${rest}` } };
  }
  const session = await resolveSession(requestOf(req));
  if (!session) {
    if (kind === "http" && (req.method === "GET" || req.method === "HEAD")) {
      return redirect(`/signin?redirectTo=${encodeURIComponent(req.url ?? "/")}`);
    }
    return json(401, "Sign in first");
  }
  if (!sameOrigin(req, app.origin, kind)) return json(403, "Cross-site request refused");
  const userId = session.user.id;
  const sessionId = session.sessionId;
  const credential: LiveCredential = { userId, via: "session", sessionId };
  const verdict = await proxyTo(req, id, credential, rest, kind);
  if (verdict.kind === "proxy") {
    if (session.setCookie) {
      verdict.responseHeaders = { ...verdict.responseHeaders, "Set-Cookie": session.setCookie };
    }
    // The gateway serves its Control UI at its root; here it lives under the prefix.
    const base = pathFormPrefix(id).slice(0, -1);
    verdict.rewritePage = (html) => rebaseControlUiPage(html, base);
  }
  return verdict;
}

const BASE_PATH_ATTRIBUTE = /(<html\b[^>]*\sdata-openclaw-control-ui-base-path=")[^"]*(")/i;
const TAG_WITH_URL = /<(?:link|script|img|a)\b[^>]*>/gi;
const SCRIPT = /(<script\b[^>]*>)([\s\S]*?<\/script\s*>)/gi;
const rebaseTags = (markup: string, base: string) =>
  markup.replace(TAG_WITH_URL, (tag) => tag.replace(/\s(src|href)="\/(?!\/)/gi, ` $1="${base}/`));

/**
 * The Control UI's page as the path form serves it: OpenClaw writes its base path into the page
 * (an attribute of <html>, read by the app for its socket and routes) and makes its asset URLs
 * absolute from it; the gateway's base is its root, so both move under `base`. Only tags are
 * touched: the inline scripts stay byte for byte (the gateway's CSP lists their hashes).
 */
export function rebaseControlUiPage(html: string, base: string): string {
  const page = html.replace(
    BASE_PATH_ATTRIBUTE,
    (_all, start: string, end: string) => `${start}${base}${end}`,
  );
  let out = "";
  let from = 0;
  for (const script of page.matchAll(SCRIPT)) {
    out += rebaseTags(page.slice(from, script.index), base);
    out += rebaseTags(script[1] as string, base) + (script[2] as string);
    from = script.index + script[0].length;
  }
  return out + rebaseTags(page.slice(from), base);
}

async function proxyTo(
  req: IncomingMessage,
  id: string,
  credential: LiveCredential,
  path: string,
  kind: "http" | "upgrade",
  ingressSessionAlive: () => Promise<boolean> = async () => true,
): Promise<IngressVerdict> {
  const { userId } = credential;
  const owner = await ownerOf(id);
  if (owner !== userId) return notFound();
  // The owner's visit is activity, and wakes a sleeping agent: it waits for the boot as a chat
  // does (decision 0164).
  await touchActivity(owner);
  if ((await getInstanceByUser(owner))?.observed_state === "sleeping") {
    await wakeIfSleeping(owner, "ingress");
    await waitWhileStarting(owner);
  }
  const gateway = await gatewayOf(owner);
  if (!gateway) return json(503, "The agent's gateway is not running", { "Retry-After": "5" });
  const control = kind === "upgrade" ? controlUiSocket(gateway.instance) : undefined;
  return {
    kind: "proxy",
    address: gateway.address,
    path,
    agentKey: gateway.instanceId,
    userKey: userId,
    responseHeaders: isControlUiPath(req.method, path) ? PAGE_HEADERS : SANDBOXED_HEADERS,
    // Who the platform signed in, for a gateway that trusts its proxy's identity (decision 0115);
    // it replaces any copy the visitor sent.
    upstreamHeaders: {
      [IDENTITY_HEADER]: userId,
      // The ingress checked the visitor's origin; the gateway sees the one origin it allows.
      origin: INGRESS_ORIGIN,
      // The Control UI's HTTP endpoints (its runtime config, avatars) need the gateway's auth;
      // the token is added here and never leaves the private network.
      ...(kind === "http" ? { authorization: `Bearer ${gatewayTokenOf(gateway.instance)}` } : {}),
    },
    // The Control UI's connect is presented with the gateway's token and a device the platform
    // pairs for this socket (decision 0170).
    ...(control ? { frames: control, onClose: () => control.close() } : {}),
    // Signed out, session revoked, password reset, user suspended: the credentials channel
    // closes it at once (4401 "credential revoked").
    watch: (revoke) => guardLive(credential, { ownerId: userId }, revoke),
    // The host's session expired, agent deleted or handed to someone else: the socket closes.
    stillAllowed: async () =>
      (await ingressSessionAlive()) &&
      (await ownerOf(id)) === userId &&
      (await gatewayOf(userId))?.address === gateway.address,
  };
}

/** The ingress's authority, handed to the web server by the entry. */
export const agentIngressAuthority: IngressAuthority = {
  claims: (req) => ingressTargetOf(req) !== undefined,
  async admit(req, kind) {
    const target = ingressTargetOf(req);
    if (!target) return notFound();
    // With agents' own hosts configured the host form is the only one (decision 0200).
    if (target.form === "path" && agentsDomain()) return notFound();
    return target.form === "host" ? admitHost(req, target, kind) : admitPath(req, target, kind);
  },
};
