import { apiRoute, endpoint } from "../server/api.server.ts";
import { issueNonce } from "../server/identity/nonces.server.ts";
import { env } from "../server/platform/env.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "A fresh single-use nonce for a Sign-In with Ethereum message",
    description:
      "Valid for 10 minutes, usable once. Also returns the domain, URI and chain id the SIWE message must name.",
    auth: "none",
    rateLimit: "identity",
    handler: async () => {
      const { nonce, expiresAt } = await issueNonce();
      const { APP_URL, BASE_CHAIN_ID } = env();
      return {
        nonce,
        expiresAt: expiresAt.toISOString(),
        domain: new URL(APP_URL).host,
        uri: new URL(APP_URL).origin,
        chainId: BASE_CHAIN_ID,
      };
    },
  }),
});
