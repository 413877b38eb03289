import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { AgentSettings } from "../components/agent-settings.tsx";
import { agentSettingsActions } from "../schemas/agent-settings.ts";
import { saveSettings, settingsPage } from "../server/agents/agent-settings.server.ts";
import { pageError } from "../server/agents/pages.server.ts";
import { ownerMay, pageOwner } from "../server/organisations/page-space.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// An agent's settings tab: forms for what people change, the JSON under "Advanced".

export const meta: MetaFunction = () => [{ title: "Settings — Agent Platform" }];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await pageOwner(request, "agents.read");
  return settingsPage(user.id, params.id ?? "").catch(pageError);
}

export const action = /* @__PURE__ */ formAction({
  schema: agentSettingsActions,
  access: (args) => ownerMay("agents.configure", args),
  fields: ["name", "model", "persona", "telegramOwner", "every", "config"],
  handler: async ({ params, session: { user }, value }) => ({
    message: await saveSettings(user.id, params.id ?? "", value).catch(pageError),
  }),
});

export default function AgentSettingsRoute() {
  return (
    <AgentSettings d={useLoaderData<typeof loader>()} reply={useActionData<typeof action>()} />
  );
}
