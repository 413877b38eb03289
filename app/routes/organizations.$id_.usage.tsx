import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, useLoaderData } from "@remix-run/react";
import { Card } from "../components/forms.tsx";
import { formatMicroUsd } from "../components/money.ts";
import { SpendByMemberAndAgent } from "../components/organisation-spend.tsx";
import { spendQuery } from "../schemas/organisations.ts";
import { requirePageSession } from "../server/accounts/pages.server.ts";
import { membershipOf } from "../server/organisations/organisations.server.ts";
import { organisationSpend, spendPeriod } from "../server/organisations/spend.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

export const meta: MetaFunction<typeof loader> = ({ data }) => [
  { title: `Usage of ${data?.organisation.name ?? "the organisation"} — Agent Platform` },
];

// An organisation's spend by member and by agent over a period (decision 0215): the same
// report as GET /api/organizations/:id/spend, for roles with billing.read. A plain GET form.
export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const id = params.id ?? "";
  const membership = await membershipOf(id, user.id);
  if (!membership) throw new Response("Organisation not found", { status: 404 });
  const search = Object.fromEntries(new URL(request.url).searchParams);
  const query = spendQuery.safeParse({
    from: search.from || undefined,
    to: search.to || undefined,
  });
  let error: string | null = query.success ? null : "Give the days as YYYY-MM-DD";
  let period = spendPeriod();
  if (query.success) {
    try {
      period = spendPeriod(query.data.from, query.data.to);
    } catch (e) {
      if (!(e instanceof DomainError) || e.status !== 400) throw e;
      error = e.message;
    }
  }
  try {
    return {
      organisation: membership.organisation,
      report: await organisationSpend(id, user.id, period),
      error,
    };
  } catch (e) {
    if (e instanceof DomainError) throw new Response(e.message, { status: e.status });
    throw e;
  }
}

export default function OrganisationUsage() {
  const { organisation, report, error } = useLoaderData<typeof loader>();
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Usage of {organisation.name}</h1>
      <p className="text-sm">
        <a href={`/organizations/${organisation.id}`} className="text-indigo-700 underline">
          Back to the organisation
        </a>
      </p>
      <Form method="get" className="flex flex-wrap items-end gap-3 text-sm">
        <label className="space-y-1">
          <span className="block font-medium">From (UTC)</span>
          <input
            type="date"
            name="from"
            defaultValue={report.period.from}
            className="rounded border px-2 py-1"
          />
        </label>
        <label className="space-y-1">
          <span className="block font-medium">To (UTC)</span>
          <input
            type="date"
            name="to"
            defaultValue={report.period.to}
            className="rounded border px-2 py-1"
          />
        </label>
        <button type="submit" className="rounded bg-indigo-600 px-3 py-1 text-white">
          Show
        </button>
      </Form>
      {error ? (
        <p role="alert" className="text-sm text-red-700">
          {error}
        </p>
      ) : null}
      <Card title={`${report.period.from} to ${report.period.to}`}>
        <p className="text-sm">
          <strong>{formatMicroUsd(report.total.costMicroUsd, 2)}</strong> on {report.total.calls}{" "}
          model {report.total.calls === 1 ? "call" : "calls"};{" "}
          {formatMicroUsd(report.total.creditsMicroUsd, 2)} of it paid from the organisation's
          credits.
        </p>
        <SpendByMemberAndAgent members={report.members} agents={report.agents} />
      </Card>
    </div>
  );
}
