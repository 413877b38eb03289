import { redirect } from "@remix-run/node";
import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { creditCheckoutByPrice } from "../server/billing/checkout.server.ts";
import { signInRedirect } from "../server/billing/pages.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Start a credit-pack purchase: 303 to the payment processor",
    description: "price must be one of the configured credit-pack price ids (else 400).",
    auth: "optional",
    query: z.object({ price: z.string().min(1).max(200) }),
    handler: async ({ auth, request, query }) => {
      if (!auth) return signInRedirect(request);
      const { url } = await creditCheckoutByPrice(auth.user, query.price);
      return redirect(url, 303);
    },
  }),
});
