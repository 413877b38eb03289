import { apiRoute, endpoint } from "../server/api.server.ts";
import { createStorageCheckout } from "../server/billing/checkout.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Start the 50 GB storage upgrade checkout; returns {url}",
    description:
      "Success and cancellation land on the files dashboard (/files). 500 when the payment processor is not configured or the checkout cannot be created.",
    auth: "jwt",
    handler: async ({ auth }) => ({ url: (await createStorageCheckout(auth.user)).url }),
  }),
});
