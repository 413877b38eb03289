import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { gatewayCall } from "../server/payments/gateway.server.ts";
import { gatewayPluginSchema } from "../server/payments/plugin-prices.server.ts";

// The paid plugin gateway: docs/decisions/0128-paid-plugin-gateway.md

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Call a plugin, paid per call by credits or an x402 payment",
    description:
      "`{plugin: 'ai.completion' | 'agent.chat' | 'skill:<name>', input}` → `{id, plugin, output, payment}`. `skill:<name>` runs a marketplace skill on your agent like POST /api/skills/:name (input `{input, agentId?, sessionId?}` → output `{skill, version, agentId, sessionId, reply, timestamp}`); priced by its own row in the price table, else by `skill:*`. Paid by the caller's credits (an API key or session; 402 `Insufficient credits` when they do not cover the price, with the x402 payment requirements so an x402 client can pay instead) or by an x402 v2 `exact` EIP-3009 payment in the `PAYMENT-SIGNATURE` header (answered with the settlement in `PAYMENT-RESPONSE`). Without either: 402 with the payment requirements (x402 v2 PaymentRequired in the body and, base64, in `PAYMENT-REQUIRED`). `ai.completion` paid by x402 costs the plugin's price plus the most its tokens can cost (the model's prices, the prompt's size and max_tokens, default 256), so the 402's amount depends on the input; paid by credits, the price is debited and the tokens are held and metered to the same credits like POST /api/ai/chat (402 when the credits do not cover the hold). A PAYMENT-SIGNATURE pays for one call: every other request carrying it, concurrent or later, gets 402 with reason `authorization_already_used` without running the plugin. A replayed, expired, underpaying or wrongly addressed authorisation: 402 with `reason`. 404 for a plugin that is not offered or a skill your agent cannot use (nothing is charged); 401 for agent.chat and skills without an API key.",
    auth: "optional",
    rateLimit: "gateway",
    body: z.object({
      plugin: gatewayPluginSchema,
      input: z.unknown().optional(),
    }),
    handler: ({ request, auth, body, startedAt }) =>
      gatewayCall(request, { userId: auth?.user.id ?? null }, body, startedAt),
  }),
});
