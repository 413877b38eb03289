import type { LoaderFunctionArgs } from "@remix-run/node";
import { pageSession } from "../server/accounts/pages.server.ts";
import { agentLive, pageError } from "../server/agents/pages.server.ts";
import { pageOwner } from "../server/organisations/page-space.server.ts";

// The agent page's live part (status and stats), polled by the page every few seconds with
// JavaScript on. Reads the database only (the worker's samples), never the gateway.
export async function loader({ request, params }: LoaderFunctionArgs) {
  if (!(await pageSession(request))) throw new Response("Sign in first", { status: 401 });
  const { user } = await pageOwner(request, "agents.read");
  try {
    return Response.json(await agentLive(user.id, params.id ?? ""), {
      headers: { "Cache-Control": "no-store" },
    });
  } catch (error) {
    pageError(error);
  }
}
