import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useLoaderData } from "@remix-run/react";
import { AgentLogs } from "../components/agent-logs.tsx";
import { agentLogsPage, agentPageQuery, pageError } from "../server/agents/pages.server.ts";
import { pageOwner } from "../server/organisations/page-space.server.ts";

// An agent's logs tab (a GET form filters by level: no JavaScript needed).

export const meta: MetaFunction = () => [{ title: "Logs — Agent Platform" }];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await pageOwner(request, "agents.read");
  const query = agentPageQuery.parse(Object.fromEntries(new URL(request.url).searchParams));
  return agentLogsPage(user.id, params.id ?? "", query.level).catch(pageError);
}

export default function AgentLogsRoute() {
  return <AgentLogs d={useLoaderData<typeof loader>()} />;
}
