import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import { useState } from "react";
import { z } from "zod";
import { Card, Errors, Field, Notice, Submit } from "../components/forms.tsx";
import { apiKeyNameSchema } from "../schemas/accounts.ts";
import { createApiKey, deleteApiKey, listApiKeys } from "../server/accounts/api-keys.server.ts";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "API keys — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  return { keys: await listApiKeys(user.id) };
}

const schema = z.discriminatedUnion("intent", [
  apiKeyNameSchema.extend({ intent: z.literal("create") }),
  z.object({ intent: z.literal("delete"), keyId: z.string().max(200) }),
]);

export const action = /* @__PURE__ */ formAction({
  schema,
  access: signedIn,
  fields: ["name"],
  resetForm: ["create"],
  handler: async ({ session: { user }, value }) => {
    if (value.intent === "delete") {
      // Already gone is fine: the list below shows the truth.
      await deleteApiKey(user.id, value.keyId).catch(() => undefined);
      return { created: null };
    }
    return { created: await createApiKey(user.id, value.name) };
  },
});

function CopyButton({ text }: { text: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      onClick={() => {
        void navigator.clipboard?.writeText(text).then(() => setCopied(true));
      }}
      className="rounded-md border border-slate-300 bg-white px-3 py-1 text-sm"
    >
      {copied ? "Copied" : "Copy"}
    </button>
  );
}

export default function Keys() {
  const { keys } = useLoaderData<typeof loader>();
  const actionData = useActionData<typeof action>();
  const [form, fields] = useForm<z.input<typeof apiKeyNameSchema>>({
    id: "new-key",
    lastResult: actionData?.intent === "create" ? actionData.result : undefined,
    constraint: getZodConstraint(apiKeyNameSchema),
    shouldValidate: "onBlur",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: apiKeyNameSchema }),
  });
  const created = actionData?.value?.created;
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">API keys</h1>
      <p className="text-sm text-slate-600">
        Programs call the API with <code>Authorization: Bearer sk_…</code>. A key can do what you
        can, except create or delete keys, change your password or delete your account.
      </p>

      {created ? (
        <section
          aria-labelledby="new-key-title"
          className="space-y-2 rounded-lg border border-amber-300 bg-amber-50 p-4"
        >
          <h2 id="new-key-title" className="font-semibold">
            Your new key “{created.name}”
          </h2>
          <Notice>Copy it now: it is shown only once and cannot be retrieved later.</Notice>
          <div className="flex items-center gap-3">
            <output data-testid="new-api-key" className="break-all font-mono text-sm">
              {created.key}
            </output>
            <CopyButton text={created.key} />
          </div>
        </section>
      ) : null}

      <Card title="Create a key">
        <Form method="post" {...getFormProps(form)} className="space-y-4">
          <input type="hidden" name="intent" value="create" />
          <Errors id={form.errorId} errors={form.errors} />
          <Field
            label="Key name"
            field={fields.name}
            hint="Up to 64 characters, e.g. “CI deploys”."
          />
          <Submit>Create key</Submit>
        </Form>
      </Card>

      <Card title="Your keys">
        {keys.length === 0 ? (
          <p className="text-sm text-slate-600">No keys yet.</p>
        ) : (
          <table className="w-full text-left text-sm">
            <thead className="text-slate-500">
              <tr>
                <th className="py-2">Name</th>
                <th>Key</th>
                <th>Created</th>
                <th>Last used</th>
                <th>
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody className="divide-y divide-slate-100">
              {keys.map((k) => (
                <tr key={k.id}>
                  <td className="py-2 font-medium">{k.name}</td>
                  <td className="font-mono">{k.keyPreview}</td>
                  <td>{new Date(k.createdAt).toUTCString()}</td>
                  <td>{k.lastUsed ? new Date(k.lastUsed).toUTCString() : "never"}</td>
                  <td className="text-right">
                    <Form method="post">
                      <input type="hidden" name="intent" value="delete" />
                      <input type="hidden" name="keyId" value={k.id} />
                      <button
                        type="submit"
                        aria-label={`Delete key ${k.name}`}
                        className="text-red-700 underline"
                      >
                        Delete
                      </button>
                    </Form>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
    </div>
  );
}
