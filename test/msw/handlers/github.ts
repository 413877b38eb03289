import { HttpResponse, http } from "msw";
import { authorize, bearer, fakeProvider, token } from "./oauth-common.ts";

// GitHub (the platform's OAuth provider `oauth2`): authorize, token (errors come back as HTTP
// 200 with {error}, as GitHub does), /user and /user/emails.
export const github = fakeProvider("github-client-id");

export const githubHandlers = [
  http.get("https://github.com/login/oauth/authorize", ({ request }) =>
    authorize(github, new URL(request.url)),
  ),
  http.post("https://github.com/login/oauth/access_token", async ({ request }) => {
    const result = await token(github, request);
    if (!result.ok) {
      return HttpResponse.json({ error: "bad_verification_code", error_description: result.error });
    }
    return HttpResponse.json({
      access_token: result.accessToken,
      token_type: "bearer",
      scope: "read:user,user:email",
    });
  }),
  http.get("https://api.github.com/user", ({ request }) => {
    const account = bearer(github, request);
    if (!account) return HttpResponse.json({ message: "Bad credentials" }, { status: 401 });
    return HttpResponse.json({
      id: Number(account.id),
      login: account.name.toLowerCase().replace(/\W+/g, "-"),
      name: account.name,
      email: null,
      avatar_url: `https://avatars.githubusercontent.com/u/${account.id}`,
    });
  }),
  http.get("https://api.github.com/user/emails", ({ request }) => {
    const account = bearer(github, request);
    if (!account) return HttpResponse.json({ message: "Bad credentials" }, { status: 401 });
    return HttpResponse.json([
      { email: `${account.id}+noreply@users.noreply.github.com`, primary: false, verified: true },
      {
        email: account.email,
        primary: true,
        verified: account.emailVerified,
        visibility: "private",
      },
    ]);
  }),
];
