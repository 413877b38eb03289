import { getFormProps, getSelectProps, useForm } from "@conform-to/react";
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
import { StatusBadge, useLiveRefresh } from "../components/agents.tsx";
import { Card, Errors, Field, Notice, Submit } from "../components/forms.tsx";
import { provisionFormSchema } from "../schemas/agents.ts";
import { agentsOverview, provisionFromPage } from "../server/agents/pages.server.ts";
import { ownerMay, pageOwner } from "../server/organisations/page-space.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "Agents — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user, organisation } = await pageOwner(request, "agents.read");
  return { ...(await agentsOverview(user.id)), space: organisation?.name ?? null };
}

// 402 (no subscription, tier above the plan) and 429 (tier limit) land on the form.
export const action = /* @__PURE__ */ formAction({
  schema: provisionFormSchema,
  access: (args) => ownerMay("agents.provision", args),
  fields: ["name", "model", "tier"],
  handler: async ({ session: { user }, value }) => {
    const { id } = await provisionFromPage(user.id, value);
    return redirect(`/agents/${id}?notice=provisioned`, 303);
  },
});

const selectClass =
  "block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";

export default function Agents() {
  const overview = useLoaderData<typeof loader>();
  const actionData = useActionData<typeof action>();
  const navigation = useNavigation();
  const [searchParams] = useSearchParams();
  useLiveRefresh();
  const [form, fields] = useForm<z.input<typeof provisionFormSchema>>({
    id: "provision",
    lastResult: actionData?.result,
    constraint: getZodConstraint(provisionFormSchema),
    // Errors clear while typing, not on blur: a blur that removes an error line moves the
    // submit button between mousedown and mouseup, and the click is lost.
    shouldValidate: "onSubmit",
    shouldRevalidate: "onInput",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: provisionFormSchema }),
  });
  const { agents, subscribed, tier, tiers, limit, models, selfHosted, space } = overview;
  const full = subscribed && agents.length >= limit;
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Agents</h1>
      {searchParams.get("notice") === "deleted" ? <Notice>Agent deleted.</Notice> : null}

      <Card title={space ? `${space}'s agents` : "Your agents"}>
        {agents.length === 0 ? (
          <p className="text-sm text-slate-600">
            No agents yet.{" "}
            <Link to="/welcome" className="text-indigo-700 underline">
              Set one up step by step
            </Link>{" "}
            or use the form below.
          </p>
        ) : (
          <table className="w-full text-left text-sm">
            <thead className="text-slate-500">
              <tr>
                <th className="py-2">Name</th>
                <th>Model</th>
                <th>Status</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody className="divide-y divide-slate-100">
              {agents.map((a) => (
                <tr key={a.id}>
                  <td className="py-2 font-medium">
                    <Link to={`/agents/${a.id}/chat`} className="text-indigo-700 underline">
                      {a.name}
                    </Link>
                  </td>
                  <td className="font-mono text-xs">{a.model}</td>
                  <td>
                    <StatusBadge status={a.status} testId={`status-${a.id}`} />
                  </td>
                  <td>{new Date(a.createdAt).toUTCString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {tier ? (
          <p className="text-xs text-slate-500" data-testid="agent-count">
            {agents.length} of {limit} agent{limit === 1 ? "" : "s"} on the {tier} tier
          </p>
        ) : null}
      </Card>

      <Card title="Provision an agent">
        {!subscribed && selfHosted ? (
          <p className="text-sm text-slate-600" data-testid="no-plan">
            Your account has no plan yet. This server takes no payments: its operator assigns plans.{" "}
            <Link to="/billing" className="text-indigo-700 underline">
              See who to ask
            </Link>
            .
          </p>
        ) : !subscribed ? (
          <p className="text-sm text-slate-600">
            Agents need an active subscription.{" "}
            <Link to="/pricing" className="text-indigo-700 underline">
              Choose a plan
            </Link>{" "}
            to provision one.
          </p>
        ) : full ? (
          <Notice>
            You have reached the {tier} tier's limit of {limit} agent{limit === 1 ? "" : "s"}.{" "}
            <Link to="/billing" className="underline">
              Upgrade your plan
            </Link>{" "}
            for more.
          </Notice>
        ) : null}
        {subscribed && !full ? (
          <Form method="post" {...getFormProps(form)} className="space-y-4">
            <Errors id={form.errorId} errors={form.errors} />
            <Field label="Name" field={fields.name} hint="Up to 100 characters." />
            <div className="space-y-1">
              <label htmlFor={fields.model.id} className="block text-sm font-medium text-slate-700">
                Model
              </label>
              <select
                {...getSelectProps(fields.model)}
                key={fields.model.key}
                defaultValue={fields.model.initialValue ?? models[0]?.id}
                className={selectClass}
              >
                {models.map((m) => (
                  <option key={m.id} value={m.id}>
                    {m.name === m.id ? m.id : `${m.name} (${m.id})`}
                  </option>
                ))}
              </select>
              <Errors id={fields.model.errorId} errors={fields.model.errors} />
            </div>
            <div className="space-y-1">
              <label htmlFor={fields.tier.id} className="block text-sm font-medium text-slate-700">
                Tier
              </label>
              <select
                {...getSelectProps(fields.tier)}
                key={fields.tier.key}
                defaultValue={fields.tier.initialValue ?? tier ?? undefined}
                className={selectClass}
              >
                {tiers.map((t) => (
                  <option key={t.id} value={t.id}>
                    {t.id} (up to {t.limit} agent{t.limit === 1 ? "" : "s"})
                  </option>
                ))}
              </select>
              <Errors id={fields.tier.errorId} errors={fields.tier.errors} />
            </div>
            <Submit busy={navigation.state === "submitting"}>
              {navigation.state === "submitting" ? "Provisioning…" : "Provision agent"}
            </Submit>
          </Form>
        ) : null}
      </Card>
    </div>
  );
}
