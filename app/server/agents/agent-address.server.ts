import { env } from "../platform/env.server.ts";

// Where an agent's Control UI answers on this installation (docs/decisions/0115-agent-ingress.md):
// its own host <id>.<AGENTS_DOMAIN> on APP_URL's scheme and port, or, with AGENTS_DOMAIN set
// empty (no wildcard DNS), the path form /agents/<id>/ui/ under APP_URL. The id is an agent's
// (agt_…) or, for the instance views, its owner's (usr_…): both open the same gateway.

/** The agents' parent domain, or undefined when the installation serves the path form only. */
export function agentsDomain(): string | undefined {
  const domain = (env().AGENTS_DOMAIN ?? "")
    .trim()
    .toLowerCase()
    .replace(/^\.+|\.+$/g, "");
  return domain || undefined;
}

/** The origin of an agent's host, e.g. http://agt_x.agents.localhost:3000. */
export function agentOrigin(id: string): string | undefined {
  const domain = agentsDomain();
  if (!domain) return undefined;
  const app = new URL(env().APP_URL);
  return `${app.protocol}//${id.toLowerCase()}.${domain}${app.port ? `:${app.port}` : ""}`;
}

export const pathFormPrefix = (id: string) => `/agents/${encodeURIComponent(id)}/ui/`;

/** The contract's `subdomain` and `url` of an agent (or of a user's instance). */
export function agentAddress(id: string): { subdomain: string; url: string } {
  const origin = agentOrigin(id);
  const app = new URL(env().APP_URL);
  return {
    subdomain: `${id.toLowerCase()}.${agentsDomain() ?? app.hostname}`,
    url: origin ? `${origin}/` : `${app.origin}${pathFormPrefix(id)}`,
  };
}
