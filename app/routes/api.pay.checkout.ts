import { redirect } from "@remix-run/node";
import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { planIds } from "../server/billing/catalog.server.ts";
import { AlreadySubscribed, createCheckout } from "../server/billing/checkout.server.ts";
import { signInRedirect } from "../server/billing/pages.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Start a subscription checkout for a plan: 303 to the payment processor",
    description: "Signed out: 303 to the sign-in page, which comes back here.",
    auth: "optional",
    query: z.object({ plan: z.enum(planIds) }),
    handler: async ({ auth, request, query }) => {
      if (!auth) return signInRedirect(request);
      try {
        const { url } = await createCheckout(auth.user, "plan", query.plan);
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
