import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { AgentPage } from "../components/agent-page.tsx";
import {
  agentLifecycle,
  agentPage,
  agentPageActions,
  agentPageQuery,
  backupFromPage,
  cloneFromPage,
  deleteAgentFromPage,
  pageError,
  unverifyAgent,
  verifyAgentWithEas,
} from "../server/agents/pages.server.ts";
import { ownerMay, pageOwner, requireAllowed } from "../server/organisations/page-space.server.ts";
import type { Permission } from "../server/organisations/roles.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction<typeof loader> = ({ data }) => [
  { title: `${data?.agent.name ?? "Agent"} — Agent Platform` },
];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await pageOwner(request, "agents.read");
  const query = agentPageQuery.parse(Object.fromEntries(new URL(request.url).searchParams));
  try {
    return await agentPage(user.id, params.id ?? "", query);
  } catch (error) {
    pageError(error);
  }
}

const back = (id: string, notice: string) =>
  redirect(`/agents/${encodeURIComponent(id)}?notice=${notice}`, 303);

export const action = /* @__PURE__ */ formAction({
  schema: agentPageActions,
  access: (args) => ownerMay("agents.read", args),
  handler: async ({ session, params, value }) => {
    const { user } = session;
    const agentId = params.id ?? "";
    requireAllowed(session, permissionOf(value.intent));
    switch (value.intent) {
      case "verify-eas":
        await verifyAgentWithEas(user.id, agentId, (value.attestationUid ?? "").trim());
        return back(agentId, "verified");
      case "unverify":
        await unverifyAgent(user.id, agentId);
        return back(agentId, "unverified");
      case "backup":
      case "restore":
      case "delete-backup":
        return back(agentId, await backupFromPage(user.id, agentId, value));
      case "clone": {
        const cloneId = await cloneFromPage(user.id, agentId);
        return redirect(`/agents/${encodeURIComponent(cloneId)}?notice=cloned`, 303);
      }
      case "delete":
        if (value.confirm !== "yes") return redirect("?confirm=delete", 303);
        await deleteAgentFromPage(user.id, agentId);
        return redirect("/agents?notice=deleted", 303);
      default:
        await agentLifecycle(user.id, agentId, value.intent);
        return back(agentId, value.intent);
    }
  },
});

/** What each of the page's forms needs of an organisation member's role. */
function permissionOf(intent: string): Permission {
  if (intent === "verify-eas" || intent === "unverify") return "agents.configure";
  if (intent === "clone" || intent === "delete") return "agents.provision";
  return "agents.operate"; // backups and lifecycle
}

export default function AgentRoute() {
  return (
    <AgentPage page={useLoaderData<typeof loader>()} actionData={useActionData<typeof action>()} />
  );
}
