import { z } from "zod";
import {
  startWhatsAppLink,
  waitWhatsAppLink,
  whatsappStatus,
} from "../server/agents/whatsapp-link.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

// Linking the caller's WhatsApp account (chatapp3) to their agent's gateway by QR: the
// contract leaves how WhatsApp is linked open. docs/decisions/0085-chat-channel-plugins.md

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The WhatsApp channel's state in the user's gateway",
    description:
      "`{configured, linked, connected, account, state, lastError}`. 404 without an instance; 502 when the gateway does not answer.",
    auth: "user",
    permission: "credentials.manage",
    handler: ({ auth }) => whatsappStatus(auth.user.id),
  }),
  POST: endpoint({
    summary: "Link WhatsApp by QR: start the gateway's login, or wait for the scan",
    description:
      "`start` (default; `force` relinks): `{linked, qrDataUrl, message}`, the QR as a PNG data URL to scan in WhatsApp → Linked devices. `wait` (`currentQrDataUrl`, `timeoutMs` ≤ 55000): linked, a refreshed QR, or still waiting. 400 when chatapp3 is not set up; 502 naming WhatsApp when its servers cannot be reached or the login fails.",
    auth: "user",
    permission: "credentials.manage",
    rateLimit: "chat",
    body: z.object({
      action: z.enum(["start", "wait"]).optional(),
      force: z.boolean().optional(),
      currentQrDataUrl: z.string().max(16_384).optional(),
      timeoutMs: z.number().int().min(1_000).max(55_000).optional(),
    }),
    handler: ({ auth, body }) =>
      body.action === "wait"
        ? waitWhatsAppLink(auth.user.id, {
            ...(body.currentQrDataUrl ? { currentQrDataUrl: body.currentQrDataUrl } : {}),
            ...(body.timeoutMs ? { timeoutMs: body.timeoutMs } : {}),
          })
        : startWhatsAppLink(auth.user.id, { force: body.force === true }),
  }),
});
