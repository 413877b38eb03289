import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData } from "@remix-run/react";
import { Card, Notice, Submit } from "../components/forms.tsx";
import { confirmEmailSchema } from "../schemas/accounts.ts";
import { confirmEmailChange, pendingEmailChange } from "../server/accounts/email-change.server.ts";
import { anyone, limitByIp } from "../server/accounts/pages.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// The link of the email-change message. Opening it shows what it would do; the button does it
// (a POST, so a mail scanner that fetches links changes nothing).

export const meta: MetaFunction = () => [{ title: "Confirm your new email — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const token = new URL(request.url).searchParams.get("token") ?? "";
  const newEmail = token && token.length <= 200 ? await pendingEmailChange(token) : undefined;
  return { token, newEmail: newEmail ?? null };
}

export const action = /* @__PURE__ */ formAction({
  schema: confirmEmailSchema,
  access: anyone,
  fields: [], // a bad token is said on the form
  handler: async ({ request, context, value }) => {
    await limitByIp(request, context, "email-change");
    await confirmEmailChange(value.token);
    return redirect("/settings?email=changed");
  },
});

export default function ConfirmEmail() {
  const { token, newEmail } = useLoaderData<typeof loader>();
  const error = useActionData<typeof action>()?.error;
  return (
    <div className="mx-auto max-w-md space-y-6">
      <h1 className="text-2xl font-semibold">Confirm your new email</h1>
      {error ? <Notice tone="error">{error}</Notice> : null}
      {!newEmail ? (
        <p className="text-slate-600">
          This link is invalid, expired or already used.{" "}
          <Link to="/settings" className="text-indigo-700 underline">
            Ask for a new one in your settings
          </Link>
          .
        </p>
      ) : (
        <Card title="New email">
          <Form method="post" className="space-y-4">
            <p>
              Your account will sign in with <strong>{newEmail}</strong> from now on.
            </p>
            <input type="hidden" name="token" value={token} />
            <Submit>Confirm {newEmail}</Submit>
          </Form>
        </Card>
      )}
    </div>
  );
}
