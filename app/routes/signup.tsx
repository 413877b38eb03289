import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import {
  Form,
  Link,
  useActionData,
  useLoaderData,
  useNavigation,
  useSearchParams,
} from "@remix-run/react";
import type { z } from "zod";
import { Card, Errors, Field, Honeypot, Submit } from "../components/forms.tsx";
import { OidcSignIn } from "../components/oidc-sign-in.tsx";
import { registerSchema } from "../schemas/accounts.ts";
import { assertNotBot } from "../server/accounts/bot.server.ts";
import { oidcButtonLabel } from "../server/accounts/oidc.server.ts";
import { anyone, limitByIp, pageSession } from "../server/accounts/pages.server.ts";
import { createSession } from "../server/accounts/sessions.server.ts";
import { createUser } from "../server/accounts/users.server.ts";
import { registerWithInvitation } from "../server/organisations/invitations.server.ts";
import { spaceCookie } from "../server/organisations/page-space.server.ts";
import { assertPasswordSignUpAllowed } from "../server/organisations/sso-enforcement.server.ts";
import { clientIp } from "../server/platform/client-ip.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "Sign up — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  if (await pageSession(request)) throw redirect("/settings");
  // An OIDC sign-in makes the account on first use (docs/decisions/0205).
  return { oidc: oidcButtonLabel() ?? null };
}

export const action = /* @__PURE__ */ formAction({
  schema: registerSchema,
  access: anyone,
  fields: ["email", "password", "name", "referralCode", "invitationToken"],
  handler: async ({ request, context, value }) => {
    assertNotBot(request, value.website);
    await limitByIp(request, context, "register");
    const { invitationToken, ...account } = value;
    await assertPasswordSignUpAllowed(account.email);
    // Invited: the account joins the organisation at once, which the switcher then shows.
    const invited = invitationToken
      ? await registerWithInvitation(account, invitationToken)
      : undefined;
    const user = invited?.user ?? (await createUser(account));
    // Signed in at once, like the sign-in form (decision 0010, amended).
    const session = await createSession(user.id, {
      ip: clientIp(request, context.remoteAddress),
      userAgent: request.headers.get("user-agent") ?? undefined,
    });
    if (invited) {
      const headers = new Headers({ "Set-Cookie": session.setCookie });
      headers.append("Set-Cookie", spaceCookie(invited.membership.organisation.id));
      return redirect("/agents", { headers });
    }
    // A new account starts with the guided first agent (issue 25).
    return redirect("/welcome", { headers: { "Set-Cookie": session.setCookie } });
  },
});

export default function SignUp() {
  const { oidc } = useLoaderData<typeof loader>();
  const lastResult = useActionData<typeof action>()?.result;
  const navigation = useNavigation();
  const [params] = useSearchParams();
  const [form, fields] = useForm<z.input<typeof registerSchema>>({
    id: "signup",
    lastResult,
    constraint: getZodConstraint(registerSchema),
    shouldValidate: "onBlur",
    shouldRevalidate: "onInput",
    defaultValue: {
      referralCode: params.get("ref") ?? undefined,
      email: params.get("email") ?? undefined,
      invitationToken: params.get("invitation") ?? undefined,
    },
    onValidate: ({ formData }) => parseWithZod(formData, { schema: registerSchema }),
  });
  return (
    <div className="mx-auto max-w-md space-y-6">
      <h1 className="text-2xl font-semibold">Create your account</h1>
      {oidc ? <OidcSignIn label={oidc} /> : null}
      <Card title="Sign up with email">
        <Form method="post" {...getFormProps(form)} className="space-y-4">
          <Errors id={form.errorId} errors={form.errors} />
          <Field label="Email" field={fields.email} type="email" autoComplete="email" />
          <Field
            label="Password"
            field={fields.password}
            type="password"
            autoComplete="new-password"
            hint="At least 8 characters."
          />
          <Field label="Name (optional)" field={fields.name} autoComplete="name" />
          <Field
            label="Referral code (optional)"
            field={fields.referralCode}
            hint="Letters and digits; you and your referrer both get credits."
          />
          {params.get("invitation") ? (
            <input type="hidden" name="invitationToken" value={params.get("invitation") ?? ""} />
          ) : null}
          <Honeypot />
          <Submit busy={navigation.state === "submitting"}>Create account</Submit>
        </Form>
      </Card>
      <p className="text-sm text-slate-600">
        Already have an account?{" "}
        <Link to="/signin" className="text-indigo-700 underline">
          Sign in
        </Link>
      </p>
    </div>
  );
}
