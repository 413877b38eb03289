import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { Onboarding } from "../components/onboarding.tsx";
import { onboardingActions, onboardingModel, onboardingName } from "../schemas/onboarding.ts";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import {
  checkBotToken,
  finishOnboarding,
  onboardingState,
} from "../server/agents/onboarding.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// The guided first agent (issue 25): name → model → chat app → provision, then the chat.
// Steps 1 and 2 are GET forms (answers in the URL), the last a post; all work without JavaScript.

export const meta: MetaFunction = () => [{ title: "Your first agent — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const query = new URL(request.url).searchParams;
  const state = await onboardingState(user.id);
  const name = query.has("name") ? onboardingName.safeParse(query.get("name")) : undefined;
  const model = query.has("model") ? onboardingModel.safeParse(query.get("model")) : undefined;
  const modelKnown = model?.success && state.models.some((m) => m.id === model.data);
  const step = !name?.success ? "name" : !modelKnown ? "model" : "channel";
  return {
    ...state,
    step,
    name: name?.success ? name.data : (query.get("name") ?? ""),
    model: model?.success ? model.data : null,
    nameError: name && !name.success ? (name.error.issues[0]?.message ?? "Invalid name") : null,
    modelError: step === "model" && model ? "Choose one of the models below" : null,
  } as const;
}

export const action = /* @__PURE__ */ formAction({
  schema: onboardingActions,
  access: signedIn,
  fields: ["token", "channel"],
  handler: async ({ session: { user }, value }) => {
    if (value.intent === "check-token") return checkBotToken(value.channel, value.token);
    const next = await finishOnboarding(user.id, {
      name: value.name,
      model: value.model,
      channel: value.channel,
      ...(value.token ? { token: value.token } : {}),
    });
    return redirect(next, 303);
  },
});

export default function Welcome() {
  return <Onboarding d={useLoaderData<typeof loader>()} reply={useActionData<typeof action>()} />;
}
