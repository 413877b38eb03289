import { type LoaderFunctionArgs, redirect } from "@remix-run/node";
import { requirePageSession } from "../server/accounts/pages.server.ts";
import { startHandoff } from "../server/agents/agent-ingress.server.ts";

// Opens an agent's own address signed in: the main origin (where the platform session lives)
// hands the user over to the agent's host with a one-time token. Signed out: sign in, then back
// here. Another user's agent: 404. docs/decisions/0115-agent-ingress.md
export async function loader({ request, params }: LoaderFunctionArgs) {
  const session = await requirePageSession(request);
  const next = new URL(request.url).searchParams.get("next") ?? "/";
  const location = await startHandoff(session.sessionId, session.user.id, params.id ?? "", next);
  if (!location) throw new Response("Agent not found", { status: 404 });
  return redirect(location, {
    headers: { "Cache-Control": "no-store", "Referrer-Policy": "no-referrer" },
  });
}
