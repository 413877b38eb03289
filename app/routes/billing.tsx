import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { BillingPage } from "../components/billing-page.tsx";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { providerNames } from "../server/ai/providers/shared.server.ts";
import { disableByok, enableByok } from "../server/billing/account.server.ts";
import { requestAddOn } from "../server/billing/add-ons.server.ts";
import {
  createCheckout,
  createPortalSession,
  creditCheckoutByPack,
} from "../server/billing/checkout.server.ts";
import { billingPage, billingPageActions } from "../server/billing/page.server.ts";
import { changePlan, currentPlanSubscription } from "../server/billing/subscriptions.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "Billing — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  return billingPage(user.id);
}

const checkout = async (pending: Promise<{ url: string }>) => redirect((await pending).url, 303);

export const action = /* @__PURE__ */ formAction({
  schema: billingPageActions,
  access: signedIn,
  handler: async ({ session: { user }, value }) => {
    switch (value.intent) {
      case "plan":
        if (!(await currentPlanSubscription(user.id))) {
          return checkout(createCheckout(user, "plan", value.plan));
        }
        await changePlan(user.id, value.plan);
        return { ok: `Your plan is now ${value.plan}.` };
      case "addon":
        return checkout(createCheckout(user, "addon", value.addon));
      case "request-addon": {
        const { created } = await requestAddOn(user.id, value.addon, value.note);
        return {
          ok: created
            ? "Request sent: an operator contacts you. Nothing is charged until you agree."
            : "You have already asked for this; the operator has your request.",
        };
      }
      case "suite":
        return checkout(createCheckout(user, "suite", "suite"));
      case "credits":
        return checkout(creditCheckoutByPack(user, value.pack));
      case "portal":
        return checkout(createPortalSession(user.id));
      case "byok-enable":
        await enableByok(user.id, value.provider, value.apiKey);
        return {
          ok: `Your ${value.provider} key is checked and stored; AI calls to ${value.provider} use it.`,
        };
      case "byok-disable":
        // An unknown provider removes every key (back to platform credits either way).
        await disableByok(
          user.id,
          providerNames.find((p) => p === value.provider),
        );
        return { ok: "Back to platform credits." };
    }
  },
});

export default function Billing() {
  return (
    <BillingPage data={useLoaderData<typeof loader>()} result={useActionData<typeof action>()} />
  );
}
