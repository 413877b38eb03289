import { HttpResponse, http } from "msw";
import { authorize, bearer, fakeProvider, token } from "./oauth-common.ts";

// Google (the platform's OAuth provider `oauth1`): authorize, token and OpenID userinfo.
export const google = fakeProvider("google-client-id");

export const googleHandlers = [
  http.get("https://accounts.google.com/o/oauth2/v2/auth", ({ request }) =>
    authorize(google, new URL(request.url)),
  ),
  http.post("https://oauth2.googleapis.com/token", async ({ request }) => {
    const result = await token(google, request);
    if (!result.ok) return HttpResponse.json({ error: result.error }, { status: 400 });
    return HttpResponse.json({
      access_token: result.accessToken,
      token_type: "Bearer",
      expires_in: 3599,
      scope: "openid email profile",
    });
  }),
  http.get("https://openidconnect.googleapis.com/v1/userinfo", ({ request }) => {
    const account = bearer(google, request);
    if (!account) return HttpResponse.json({ error: "invalid_token" }, { status: 401 });
    return HttpResponse.json({
      sub: account.id,
      email: account.email,
      email_verified: account.emailVerified,
      name: account.name,
      picture: `https://lh3.googleusercontent.com/a/${account.id}`,
    });
  }),
];
