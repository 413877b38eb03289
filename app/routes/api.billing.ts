import { z } from "zod";
import { providerNames } from "../server/ai/providers/shared.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import {
  billingSummary,
  disableByok,
  enableByok,
  usageByDay,
} from "../server/billing/account.server.ts";
import { apiPlanIds, creditPackIds } from "../server/billing/catalog.server.ts";
import { createCheckout, creditCheckoutByPack } from "../server/billing/checkout.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

const actions = ["create-checkout", "enable-byok", "disable-byok", "get-usage", "buy-credits"];

const body = z.discriminatedUnion(
  "action",
  [
    z.object({ action: z.literal("create-checkout"), plan: z.enum(apiPlanIds) }),
    z.object({
      action: z.literal("enable-byok"),
      apiKey: z.string().trim().min(8).max(500),
      provider: z.enum(providerNames),
    }),
    z.object({ action: z.literal("disable-byok"), provider: z.enum(providerNames).optional() }),
    z.object({
      action: z.literal("get-usage"),
      days: z.coerce.number().int().min(1).max(90).optional(),
    }),
    z.object({ action: z.literal("buy-credits"), pack: z.enum(creditPackIds) }),
  ],
  { error: () => `action: must be one of ${actions.join(", ")}` },
);

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Current plan, subscription status and period, credits, storage and usage",
    auth: "jwt",
    permission: "billing.read",
    handler: ({ auth }) => billingSummary(auth.user.id),
  }),
  POST: endpoint({
    summary: "Billing actions: create-checkout, enable-byok, disable-byok, get-usage, buy-credits",
    auth: "jwt",
    body,
    handler: async ({ auth, body }) => {
      const user = auth.user;
      switch (body.action) {
        case "create-checkout":
          return { url: (await createCheckout(user, "api", body.plan)).url };
        case "buy-credits":
          return { url: (await creditCheckoutByPack(user, body.pack)).url };
        case "enable-byok": {
          const result = await enableByok(user.id, body.provider, body.apiKey);
          return {
            success: true,
            byok: true,
            provider: result.provider,
            keys: result.keyProviders,
          };
        }
        case "disable-byok":
          return { success: true, byok: false, ...(await disableByok(user.id, body.provider)) };
        case "get-usage":
          return { success: true, usage: await usageByDay(user.id, body.days ?? 1) };
        default:
          throw new DomainError(400, "Unknown action");
      }
    },
  }),
});
