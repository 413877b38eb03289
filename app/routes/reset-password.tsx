import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData, useNavigation } from "@remix-run/react";
import type { z } from "zod";
import { Card, Errors, Field, Submit } from "../components/forms.tsx";
import { resetPasswordSchema } from "../schemas/accounts.ts";
import { anyone, limitByIp } from "../server/accounts/pages.server.ts";
import { resetPassword } from "../server/accounts/password-reset.server.ts";
import { clearSessionCookie } from "../server/accounts/sessions.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "Choose a new password — Agent Platform" }];

export function loader({ request }: LoaderFunctionArgs) {
  return { token: new URL(request.url).searchParams.get("token") ?? "" };
}

export const action = /* @__PURE__ */ formAction({
  schema: resetPasswordSchema,
  access: anyone,
  fields: ["token", "password"],
  handler: async ({ request, context, value }) => {
    await limitByIp(request, context, "reset-password");
    await resetPassword(value.token, value.password);
    return redirect("/signin?reset=1", { headers: { "Set-Cookie": await clearSessionCookie() } });
  },
});

export default function ResetPassword() {
  const { token } = useLoaderData<typeof loader>();
  const lastResult = useActionData<typeof action>()?.result;
  const navigation = useNavigation();
  const [form, fields] = useForm<z.input<typeof resetPasswordSchema>>({
    id: "reset-password",
    lastResult,
    constraint: getZodConstraint(resetPasswordSchema),
    shouldValidate: "onBlur",
    defaultValue: { token },
    onValidate: ({ formData }) => parseWithZod(formData, { schema: resetPasswordSchema }),
  });
  return (
    <div className="mx-auto max-w-md space-y-6">
      <h1 className="text-2xl font-semibold">Choose a new password</h1>
      {!token ? (
        <p className="text-slate-600">
          This page needs the link from the reset email.{" "}
          <Link to="/forgot-password" className="text-indigo-700 underline">
            Ask for a new link
          </Link>
          .
        </p>
      ) : (
        <Card title="New password">
          <Form method="post" {...getFormProps(form)} className="space-y-4">
            <Errors id={form.errorId} errors={form.errors} />
            <input type="hidden" name={fields.token.name} value={token} />
            <Errors errors={fields.token.errors} />
            <Field
              label="New password"
              field={fields.password}
              type="password"
              autoComplete="new-password"
              hint="At least 6 characters. Every signed-in browser will be signed out."
            />
            <Submit busy={navigation.state === "submitting"}>Set new password</Submit>
          </Form>
        </Card>
      )}
    </div>
  );
}
