// Which of a gateway's paths are the Control UI's own (decision 0200): its page and in-app
// routes, and the static files OpenClaw serves from the image's read-only copy of the UI
// (`gateway.controlUi.root`, decision 0187). Everything else a gateway answers — canvas files,
// assistant media, avatars, plugin and MCP-app pages, its HTTP APIs — is content the agent or
// whoever talks to it controls, and is served in a CSP sandbox (an opaque origin: its script, if
// any, cannot act as the owner on the platform). Decided from the request alone, never from the
// gateway's answer.

/** The top-level entries of OpenClaw's `dist/control-ui` folder (openclaw 2026.9.x). */
const UI_FILES = new Set([
  "index.html",
  "control-ui-config.json", // the UI's bootstrap endpoint (JSON)
  "apple-touch-icon.png",
  "asset-manifest.json",
  "favicon-32.png",
  "favicon.ico",
  "favicon.svg",
  "manifest.webmanifest",
  "social-card.png",
  "sw.js",
]);
const UI_FOLDERS = new Set([
  "assets",
  "app-art",
  "cloud-provider-icons",
  "community-art",
  "file-icons",
  "fonts",
  "provider-icons",
  "themes",
]);
/**
 * First path segments the gateway serves other things under (OpenClaw's own list of what is not
 * the Control UI, plus its share previews and the legacy /ui): never an in-app route.
 */
const NOT_UI = new Set([
  "__openclaw__",
  "__openclaw",
  "api",
  "hooks",
  "j",
  "mcp",
  "plugins",
  "share",
  "tools",
  "ui",
  "v1",
  "healthz",
  "readyz",
]);

/** Whether `method path` (the gateway's path, with or without a query) is the Control UI's own. */
export function isControlUiPath(method: string | undefined, path: string): boolean {
  if (method !== "GET" && method !== "HEAD") return false;
  let pathname: string;
  try {
    pathname = decodeURIComponent(path.split(/[?#]/, 1)[0] as string);
  } catch {
    return false;
  }
  if (pathname === "/") return true;
  if (!pathname.startsWith("/") || pathname.includes("\\")) return false;
  const segments = pathname.slice(1).split("/");
  if (segments.includes("..") || segments.includes(".")) return false;
  const first = segments[0] as string;
  if (segments.length === 1 && UI_FILES.has(first)) return true;
  if (segments.length > 1 && UI_FOLDERS.has(first)) return true;
  // An in-app route (/chat, /sessions/abc): OpenClaw answers it with the image's index.html.
  const last = segments.at(-1) as string;
  return !NOT_UI.has(first) && !last.includes(".");
}
