import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import type { MetaFunction } from "@remix-run/node";
import { Form, Link, useActionData, useNavigation } from "@remix-run/react";
import type { z } from "zod";
import { Card, Errors, Field, Honeypot, Notice, Submit } from "../components/forms.tsx";
import { forgotPasswordSchema } from "../schemas/accounts.ts";
import { assertNotBot } from "../server/accounts/bot.server.ts";
import { anyone, limitByIp } from "../server/accounts/pages.server.ts";
import {
  FORGOT_PASSWORD_MESSAGE,
  requestPasswordReset,
} from "../server/accounts/password-reset.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "Forgot password — Agent Platform" }];

export const action = /* @__PURE__ */ formAction({
  schema: forgotPasswordSchema,
  access: anyone,
  fields: ["email"],
  resetForm: true,
  handler: async ({ request, context, value }) => {
    assertNotBot(request, value.website);
    await limitByIp(request, context, "forgot-password");
    await requestPasswordReset(value.email);
    return { sent: true };
  },
});

export default function ForgotPassword() {
  const actionData = useActionData<typeof action>();
  const navigation = useNavigation();
  const [form, fields] = useForm<z.input<typeof forgotPasswordSchema>>({
    id: "forgot-password",
    lastResult: actionData?.result,
    constraint: getZodConstraint(forgotPasswordSchema),
    shouldValidate: "onBlur",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: forgotPasswordSchema }),
  });
  return (
    <div className="mx-auto max-w-md space-y-6">
      <h1 className="text-2xl font-semibold">Forgot your password?</h1>
      {actionData?.value?.sent ? <Notice>{FORGOT_PASSWORD_MESSAGE}.</Notice> : null}
      <Card title="We will email you a link to choose a new one">
        <Form method="post" {...getFormProps(form)} className="space-y-4">
          <Errors id={form.errorId} errors={form.errors} />
          <Field label="Email" field={fields.email} type="email" autoComplete="email" />
          <Honeypot />
          <Submit busy={navigation.state === "submitting"}>Send reset link</Submit>
        </Form>
      </Card>
      <Link to="/signin" className="text-sm text-indigo-700 underline">
        Back to sign in
      </Link>
    </div>
  );
}
