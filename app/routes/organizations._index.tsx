import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData } from "@remix-run/react";
import type { z } from "zod";
import { Card, Errors, Field, Submit } from "../components/forms.tsx";
import { organisationNameSchema } from "../schemas/organisations.ts";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import {
  createOrganisation,
  listMemberships,
} from "../server/organisations/organisations.server.ts";
import { spaceCookie } from "../server/organisations/page-space.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";
import { consume } from "../server/platform/rate-limit.server.ts";

export const meta: MetaFunction = () => [{ title: "Teams — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  return { memberships: await listMemberships(user.id) };
}

// A new organisation: its owner acts for it at once (the switcher moves there).
export const action = /* @__PURE__ */ formAction({
  schema: organisationNameSchema,
  access: signedIn,
  fields: ["name"],
  handler: async ({ session: { user }, value }) => {
    if (!(await consume("organisations", `user:${user.id}`)).allowed) {
      throw new DomainError(429, "Too many organisations made in the last hour");
    }
    const { organisation } = await createOrganisation(user.id, value.name);
    return redirect(`/organizations/${organisation.id}`, {
      status: 303,
      headers: { "Set-Cookie": spaceCookie(organisation.id) },
    });
  },
});

export default function Organisations() {
  const { memberships } = useLoaderData<typeof loader>();
  const actionData = useActionData<typeof action>();
  const [form, fields] = useForm<z.input<typeof organisationNameSchema>>({
    id: "new-organisation",
    lastResult: actionData?.result,
    constraint: getZodConstraint(organisationNameSchema),
    shouldValidate: "onBlur",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: organisationNameSchema }),
  });
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Teams</h1>
      <p className="text-sm text-slate-600">
        An organisation owns agents, credits and keys as you do; its members use them as far as
        their role allows. Switch between your own space and an organisation at the top.
      </p>
      <Card title="Your organisations">
        {memberships.length === 0 ? (
          <p className="text-sm text-slate-600">You are in no organisation yet.</p>
        ) : (
          <ul className="divide-y divide-slate-100 text-sm">
            {memberships.map((m) => (
              <li key={m.organisation.id} className="flex items-center justify-between py-2">
                <Link
                  to={`/organizations/${m.organisation.id}`}
                  className="font-medium text-indigo-700 underline"
                >
                  {m.organisation.name}
                </Link>
                <span className="text-slate-500">{m.role}</span>
              </li>
            ))}
          </ul>
        )}
      </Card>
      <Card title="Create an organisation">
        <Form method="post" {...getFormProps(form)} className="space-y-4">
          <Errors id={form.errorId} errors={form.errors} />
          <Field label="Name" field={fields.name} hint="Up to 80 characters." />
          <Submit>Create organisation</Submit>
        </Form>
      </Card>
    </div>
  );
}
