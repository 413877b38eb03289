import { registerSchema } from "../schemas/accounts.ts";
import { isForeignOrigin } from "../server/accounts/auth.server.ts";
import { assertNotBot } from "../server/accounts/bot.server.ts";
import { createSession } from "../server/accounts/sessions.server.ts";
import { createUser } from "../server/accounts/users.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { registerWithInvitation } from "../server/organisations/invitations.server.ts";
import { assertPasswordSignUpAllowed } from "../server/organisations/sso-enforcement.server.ts";
import { json } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Register with email and password",
    description:
      "Bot detection (403) and a per-IP limit (429) apply. A referral code naming an existing user credits both users once the new email is verified (at most 20 paid referrals per referrer). Emits user.created. Signs the new user in (session cookie), except for a request a browser marks as cross-site. With invitationToken (ours, optional) the new account joins the inviting organisation at once: the email must be the invited one (403 otherwise, and no account is made), 404 for an unknown token, 410 for a used, revoked or expired one, 402 when the organisation's seats are all taken. 403 for an email at a domain whose organisation requires single sign-on (docs/decisions/0212).",
    auth: "none",
    rateLimit: "register",
    status: 201,
    body: registerSchema,
    handler: async ({ request, body, ip }) => {
      assertNotBot(request, body.website);
      const { invitationToken, website: _honeypot, ...account } = body;
      await assertPasswordSignUpAllowed(account.email);
      const user = invitationToken
        ? (await registerWithInvitation(account, invitationToken)).user
        : await createUser(account);
      const created = { id: user.id, email: user.email, name: user.name };
      // Another site's page must not sign its visitor into an account it made (login CSRF).
      if (isForeignOrigin(request)) return json(created, { status: 201 });
      const session = await createSession(user.id, {
        ip,
        userAgent: request.headers.get("user-agent") ?? undefined,
      });
      return json(created, { status: 201, headers: { "Set-Cookie": session.setCookie } });
    },
  }),
});
