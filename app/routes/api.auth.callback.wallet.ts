import { z } from "zod";
import { assertSameOrigin } from "../server/accounts/auth.server.ts";
import { publicUser } from "../server/accounts/model.server.ts";
import { AFTER_SIGN_IN } from "../server/accounts/pages.server.ts";
import { createSession } from "../server/accounts/sessions.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { signInWithWallet } from "../server/identity/siwe.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { json } from "../server/platform/http.server.ts";
import { safeRedirect } from "../server/platform/safe-redirect.server.ts";

// Missing fields are 401 (the contract), not the builder's 400: every field is optional here.
const body = z
  .object({
    message: z.string().optional(),
    signature: z.string().optional(),
    callbackUrl: z.string().optional(),
  })
  .optional();

/** Only same-site paths: never an open redirect. */

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Sign in with Ethereum (SIWE, EIP-4361) on Base",
    description:
      "Body {message, signature, callbackUrl?}. The message must name APP_URL's host, chain id 8453 and a nonce from GET /api/auth/wallet/nonce (single use), and be within its time window; EOA, ERC-1271 and ERC-6492 signatures are verified on the chain. Creates the user (email `<address>@wallet.invalid`) or links the one with that email, sets the session cookie, and redirects (302, form posts) or answers {success, user, url} (JSON) with the callback URL. 401 {error} for a missing field, domain or chain mismatch, unknown/used nonce, expired message or bad signature; 502 when the chain cannot be reached for a smart-wallet signature.",
    auth: "none",
    rateLimit: "identity",
    body,
    handler: async ({ request, body, ip }) => {
      assertSameOrigin(request);
      if (!body?.message || !body.signature) {
        throw new DomainError(401, "message and signature are required");
      }
      const { user } = await signInWithWallet(body.message, body.signature);
      const session = await createSession(user.id, {
        ip,
        userAgent: request.headers.get("user-agent") ?? undefined,
      });
      const url = safeRedirect(body.callbackUrl, AFTER_SIGN_IN);
      if ((request.headers.get("content-type") ?? "").includes("form-urlencoded")) {
        return new Response(null, {
          status: 302,
          headers: { Location: url, "Set-Cookie": session.setCookie, "Cache-Control": "no-store" },
        });
      }
      return json(
        { success: true, user: publicUser(user), url },
        { headers: { "Set-Cookie": session.setCookie } },
      );
    },
  }),
});
