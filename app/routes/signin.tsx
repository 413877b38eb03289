import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData, useNavigation } from "@remix-run/react";
import { z } from "zod";
import { Card, Errors, Field, Notice, Submit } from "../components/forms.tsx";
import { OidcSignIn } from "../components/oidc-sign-in.tsx";
import { SsoSignIn } from "../components/sso-sign-in.tsx";
import { WalletSignIn } from "../components/wallet-sign-in.tsx";
import { signInSchema } from "../schemas/accounts.ts";
import { isConfigured, oauthProviders, providerLabels } from "../server/accounts/oauth.server.ts";
import { oidcButtonLabel } from "../server/accounts/oidc.server.ts";
import { AFTER_SIGN_IN, anyone, pageSession } from "../server/accounts/pages.server.ts";
import { createSession } from "../server/accounts/sessions.server.ts";
import { signInWithCredentials } from "../server/accounts/signin.server.ts";
import { clientIp } from "../server/platform/client-ip.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";
import { safeRedirect } from "../server/platform/safe-redirect.server.ts";
import { anySsoConnection } from "../server/sso/connections.server.ts";

export const meta: MetaFunction = () => [{ title: "Sign in — Agent Platform" }];

const schema = signInSchema.extend({ redirectTo: z.string().optional() });

const oauthErrors: Record<string, string> = {
  oauth_denied: "Sign-in was cancelled at the provider.",
  oauth_unverified: "The provider has not verified that email address, so we cannot use it.",
  oauth_conflict: "That account is already linked to a different identity at this provider.",
  oauth_failed: "Sign-in with the provider failed. Please try again.",
  // OpenID Connect (docs/decisions/0205); the log says which check failed.
  oidc_denied: "Sign-in was cancelled at the identity provider.",
  oidc_unverified:
    "The identity provider has not verified an email address for you, so we cannot use it.",
  oidc_conflict: "That account is already linked to a different identity at the identity provider.",
  oidc_state:
    "That sign-in attempt has expired or was started in another browser. Please start again.",
  oidc_token:
    "The identity provider's answer did not pass our checks, so we did not sign you in. Please try again; if it keeps happening, tell the operator.",
  oidc_failed: "Sign-in with the identity provider failed. Please try again.",
  // An organisation's single sign-on (docs/decisions/0210, 0211); the log has the detail.
  sso_unknown:
    "No organisation signs in with that SSO name or email domain. Check it with your administrator.",
  sso_conflict:
    "An account with your email address already exists here and is not linked to your organisation's sign-in. Sign in with it as you usually do, or ask your administrator.",
  sso_domain:
    "Your organisation signs people in here only at the email domains it has verified, and yours is not one of them. Ask your administrator.",
  sso_no_email: "Your organisation's identity provider did not give us an email address for you.",
  sso_failed: "Sign-in through your organisation failed. Please try again.",
  sso_seats:
    "Your organisation has no seat left for you. Ask its administrator to free one or add seats.",
  saml_signature:
    "Your organisation's sign-in answer was not signed by its identity provider, so we did not sign you in.",
  saml_audience:
    "Your organisation's sign-in answer was meant for another service, so we did not sign you in.",
  saml_expired:
    "Your organisation's sign-in answer has expired (or the clocks disagree). Please sign in again.",
  saml_replay:
    "That sign-in answer was already used. Please start again from your organisation's sign-in.",
  saml_request: "That sign-in answer does not belong to a sign-in we started. Please start again.",
  saml_invalid:
    "Your organisation's sign-in answer did not pass our checks, so we did not sign you in. If it keeps happening, tell your administrator.",
  // An organisation requires single sign-on for the email's domain (docs/decisions/0212).
  sso_required:
    'Your organisation requires single sign-on for your email\'s domain: use "Sign in with SSO" with your work email.',
};

export async function loader({ request }: LoaderFunctionArgs) {
  const url = new URL(request.url);
  const redirectTo = safeRedirect(url.searchParams.get("redirectTo"), AFTER_SIGN_IN);
  if (await pageSession(request)) throw redirect(redirectTo);
  return {
    redirectTo,
    email: url.searchParams.get("email") ?? "",
    notice: url.searchParams.has("reset") ? "Password changed. Sign in with the new one." : null,
    error: oauthErrors[url.searchParams.get("error") ?? ""] ?? null,
    providers: oauthProviders.map((id) => ({
      id,
      label: providerLabels[id],
      configured: isConfigured(id),
    })),
    oidc: oidcButtonLabel() ?? null,
    sso: await anySsoConnection(),
  };
}

export const action = /* @__PURE__ */ formAction({
  schema,
  access: anyone,
  fields: ["email", "password"],
  handler: async ({ request, context, value }) => {
    const ip = clientIp(request, context.remoteAddress);
    const user = await signInWithCredentials(request, value, ip);
    const session = await createSession(user.id, {
      ip,
      userAgent: request.headers.get("user-agent") ?? undefined,
    });
    return redirect(safeRedirect(value.redirectTo, AFTER_SIGN_IN), {
      headers: { "Set-Cookie": session.setCookie },
    });
  },
});

export default function SignIn() {
  const { redirectTo, email, notice, error, providers, oidc, sso } = useLoaderData<typeof loader>();
  const lastResult = useActionData<typeof action>()?.result;
  const navigation = useNavigation();
  const [form, fields] = useForm<z.input<typeof schema>>({
    id: "signin",
    lastResult,
    constraint: getZodConstraint(schema),
    shouldValidate: "onSubmit",
    defaultValue: { email },
    onValidate: ({ formData }) => parseWithZod(formData, { schema }),
  });
  return (
    <div className="mx-auto max-w-md space-y-6">
      <h1 className="text-2xl font-semibold">Sign in</h1>
      {notice ? <Notice>{notice}</Notice> : null}
      {error ? <Notice tone="error">{error}</Notice> : null}
      {oidc ? <OidcSignIn label={oidc} /> : null}
      {sso ? (
        <Card title="With your organisation">
          <SsoSignIn />
        </Card>
      ) : null}
      <Card title="With email and password">
        <Form method="post" {...getFormProps(form)} className="space-y-4">
          <Errors id={form.errorId} errors={form.errors} />
          <input type="hidden" name="redirectTo" value={redirectTo} />
          <Field label="Email" field={fields.email} type="email" autoComplete="email" />
          <Field
            label="Password"
            field={fields.password}
            type="password"
            autoComplete="current-password"
          />
          <div className="flex items-center justify-between">
            <Submit busy={navigation.state === "submitting"}>Sign in</Submit>
            <Link to="/forgot-password" className="text-sm text-indigo-700 underline">
              Forgot your password?
            </Link>
          </div>
        </Form>
      </Card>
      <Card title="Or continue with">
        <div className="flex flex-wrap gap-3">
          {providers.map((p) =>
            p.configured ? (
              <a
                key={p.id}
                href={`/api/auth/${p.id}`}
                className="rounded-md border border-slate-300 bg-white px-4 py-2 text-sm font-medium hover:bg-slate-50"
              >
                Continue with {p.label}
              </a>
            ) : (
              <span
                key={p.id}
                aria-disabled="true"
                title={`${p.label} sign-in is not configured on this server`}
                className="cursor-not-allowed rounded-md border border-slate-200 px-4 py-2 text-sm text-slate-400"
              >
                Continue with {p.label} (not configured)
              </span>
            ),
          )}
        </div>
        <WalletSignIn redirectTo={redirectTo} />
      </Card>
      <p className="text-sm text-slate-600">
        New here?{" "}
        <Link to="/signup" className="text-indigo-700 underline">
          Create an account
        </Link>
      </p>
    </div>
  );
}
