import { signInSchema } from "../schemas/accounts.ts";
import { assertSameOrigin } from "../server/accounts/auth.server.ts";
import { publicUser } from "../server/accounts/model.server.ts";
import { createSession } from "../server/accounts/sessions.server.ts";
import { signInWithCredentials } from "../server/accounts/signin.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { errorResponse, json } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Sign in with email and password (JSON or form body)",
    description:
      "Sets the session cookie. 401 for an unknown email or a wrong password alike; 429 with Retry-After after repeated failures for one email (5 in 15 minutes) or from one client address (20 in 15 minutes; an IPv6 client by its /64), before any password is checked.",
    auth: "none",
    body: signInSchema,
    handler: async ({ request, body, ip }) => {
      assertSameOrigin(request);
      try {
        const user = await signInWithCredentials(request, body, ip);
        const session = await createSession(user.id, {
          ip,
          userAgent: request.headers.get("user-agent") ?? undefined,
        });
        return json(
          { success: true, user: publicUser(user) },
          { headers: { "Set-Cookie": session.setCookie } },
        );
      } catch (error) {
        if (error instanceof DomainError && error.status === 429) {
          const retryAfter = String(error.extra?.retryAfter ?? 60);
          const res = errorResponse(429, error.message);
          res.headers.set("Retry-After", retryAfter);
          return res;
        }
        throw error;
      }
    },
  }),
});
