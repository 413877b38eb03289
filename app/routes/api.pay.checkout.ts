import { redirect } from "@remix-run/node";
import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { planIds } from "../server/billing/catalog.server.ts";
import { AlreadySubscribed, createCheckout } from "../server/billing/checkout.server.ts";
import { signInRedirect } from "../server/billing/pages.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Start a subscription checkout for a plan: 303 to the payment processor",
    description:
      "Signed out: 303 to the sign-in page, which comes back here. For an organisation (X-Organization, billing.manage): its customer carries its billing contact's email, and seats (ours, optional) adds that many extra seats to the subscription (decision 0215).",
    auth: "optional",
    permission: "billing.manage",
    query: z.object({
      plan: z.enum(planIds),
      seats: z.coerce.number().int().min(0).max(1000).optional(),
    }),
    handler: async ({ auth, request, query }) => {
      if (!auth) return signInRedirect(request);
      try {
        // An organisation's checkout comes back to its page.
        const back =
          auth.user.kind === "organisation" ? `/organizations/${auth.user.id}` : undefined;
        const { url } = await createCheckout(auth.user, "plan", query.plan, {
          ...(query.seats ? { seats: query.seats } : {}),
          ...(back
            ? { successPath: `${back}?checkout=success`, cancelPath: `${back}?checkout=canceled` }
            : {}),
        });
        return redirect(url, 303);
      } catch (error) {
        // A browser followed a /pricing link: the billing page explains and offers the change.
        if (error instanceof AlreadySubscribed) {
          return redirect("/billing?checkout=already-subscribed", 303);
        }
        throw error;
      }
    },
  }),
});
