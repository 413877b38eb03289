import { Form, Link, useSearchParams } from "@remix-run/react";
import type { billingPage } from "../server/billing/page.server.ts";
import type { FormReply } from "../server/platform/form-action.server.ts";
import { Card, Notice, Submit } from "./forms.tsx";
import { formatGbp } from "./money.ts";
import { SelfHostedPlan } from "./self-hosted.tsx";

// The billing page (app/routes/billing.tsx): plan, add-ons, credits, BYOK and AI usage.

export type BillingPageData = Awaited<ReturnType<typeof billingPage>>;

const statusTone: Record<string, string> = {
  active: "bg-emerald-100 text-emerald-800",
  trialing: "bg-emerald-100 text-emerald-800",
  past_due: "bg-amber-100 text-amber-800",
  canceled: "bg-slate-200 text-slate-700",
};

export function BillingPage({
  data,
  result,
}: {
  data: BillingPageData;
  result: FormReply<{ ok: string | null }> | undefined;
}) {
  const { summary, usage, credits, plans, addOns, suite, packs, providers, agentCount } = data;
  const [params] = useSearchParams();
  const maxCost = Math.max(0.000001, ...usage.map((d) => d.costUsd));
  const subscribedAddOns = new Set(
    summary.subscriptions
      .filter((s) => s.kind === "addon" && ["active", "trialing", "past_due"].includes(s.status))
      .map((s) => s.item),
  );
  const requestedAddOns = new Set(
    summary.serviceRequests
      .filter((r) => r.status === "open" || r.status === "in_progress")
      .map((r) => r.addon as string),
  );
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Billing</h1>
      {params.get("checkout") === "success" ? (
        <Notice>
          Thanks! Your purchase shows here as soon as the payment processor confirms it.
        </Notice>
      ) : null}
      {params.get("checkout") === "canceled" ? (
        <Notice tone="error">Checkout canceled.</Notice>
      ) : null}
      {params.get("checkout") === "already-subscribed" ? (
        <Notice tone="error">
          You already have a plan subscription. Choose a plan below to change it: the change updates
          your subscription instead of opening a second one.
        </Notice>
      ) : null}
      {result?.value?.ok ? <Notice>{result.value.ok}</Notice> : null}
      {result?.error ? <Notice tone="error">{result.error}</Notice> : null}

      <Card title="Your plan">
        {summary.selfHosted ? (
          <SelfHostedPlan
            facts={{ contact: summary.operator.contact, defaultPlan: summary.operator.defaultPlan }}
            plan={summary.plan}
            source={summary.planSource}
            agentThreads={summary.limits.agentThreads}
            ramGb={summary.limits.ramMb / 1024}
          />
        ) : null}
        <p data-testid="current-plan">
          Plan <strong>{summary.plan}</strong>{" "}
          <span
            className={`rounded px-2 py-0.5 text-xs ${statusTone[summary.status] ?? "bg-slate-100"}`}
          >
            {summary.status}
          </span>
          {summary.currentPeriodEnd ? (
            <span className="text-sm text-slate-600">
              {" "}
              — {summary.cancelAtPeriodEnd ? "ends" : "renews"} on{" "}
              {new Date(summary.currentPeriodEnd).toUTCString()}
            </span>
          ) : null}
        </p>
        {summary.status === "past_due" ? (
          <Notice tone="error">
            Your last payment failed. Update your payment method in the customer portal.
          </Notice>
        ) : null}
        <p className="text-sm text-slate-600">
          Agent threads:{" "}
          {summary.limits.agentThreads === null ? "unlimited" : summary.limits.agentThreads}, RAM{" "}
          {summary.limits.ramMb / 1024} GB; you have{" "}
          <span data-testid="agent-count">{agentCount}</span> agent{agentCount === 1 ? "" : "s"}.
          Changing to a smaller plan stops nothing: agents beyond the new plan's threads keep
          running until you stop them, and no new one can start.
        </p>
        <ul className="grid gap-3 md:grid-cols-4">
          {plans.map((p) => (
            <li key={p.id} className="rounded-md border border-slate-200 p-3 text-sm">
              <Form method="post" className="space-y-2">
                <input type="hidden" name="intent" value="plan" />
                <input type="hidden" name="plan" value={p.id} />
                <p className="font-medium">
                  {p.name} · {formatGbp(p.pricePence)}/mo
                </p>
                <p className="text-slate-600">
                  {p.limits.agentThreads === null ? "unlimited" : p.limits.agentThreads} threads,{" "}
                  {p.limits.ramMb / 1024} GB
                </p>
                {p.warning ? (
                  <p className="text-amber-700" data-testid={`downgrade-warning-${p.id}`}>
                    {p.warning}
                  </p>
                ) : null}
                {summary.plan === p.id ? (
                  <p className="text-emerald-700">Current plan</p>
                ) : !summary.paymentsConfigured ? (
                  <p className="text-slate-600">Given by the operator</p>
                ) : (
                  <button type="submit" className="text-indigo-700 underline">
                    {summary.plan === "free" ? `Subscribe to ${p.name}` : `Switch to ${p.name}`}
                  </button>
                )}
              </Form>
            </li>
          ))}
        </ul>
        {summary.paymentsConfigured ? (
          <Form method="post">
            <input type="hidden" name="intent" value="portal" />
            <button type="submit" className="text-sm text-indigo-700 underline">
              Manage payment methods and invoices (customer portal)
            </button>
          </Form>
        ) : null}
      </Card>

      <Card title="Add-ons and the enterprise suite">
        <ul className="divide-y divide-slate-100 text-sm">
          {addOns.map((a) => (
            <li key={a.id} data-addon={a.id} className="space-y-1 py-2">
              <div className="flex items-center justify-between">
                <span>
                  {a.name} ·{" "}
                  {a.fulfilment === "request" ? "on request" : `${formatGbp(a.pricePence)}/mo`}
                </span>
                {subscribedAddOns.has(a.id) ? (
                  <span className="text-emerald-700">Subscribed</span>
                ) : a.fulfilment === "request" ? (
                  requestedAddOns.has(a.id) ? (
                    <span className="text-slate-600">Requested: an operator contacts you</span>
                  ) : (
                    <Form method="post">
                      <input type="hidden" name="intent" value="request-addon" />
                      <input type="hidden" name="addon" value={a.id} />
                      <button type="submit" className="text-indigo-700 underline">
                        Request {a.name}
                      </button>
                    </Form>
                  )
                ) : summary.paymentsConfigured ? (
                  <Form method="post">
                    <input type="hidden" name="intent" value="addon" />
                    <input type="hidden" name="addon" value={a.id} />
                    <button type="submit" className="text-indigo-700 underline">
                      Add {a.name}
                    </button>
                  </Form>
                ) : (
                  <span className="text-slate-600">Ask the operator</span>
                )}
              </div>
              <p className="text-slate-600">{a.gives}</p>
            </li>
          ))}
          <li className="flex items-center justify-between py-2">
            <span>
              {suite.name} · {formatGbp(suite.pricePence)}/mo
            </span>
            {summary.paymentsConfigured ? (
              <Form method="post">
                <input type="hidden" name="intent" value="suite" />
                <button type="submit" className="text-indigo-700 underline">
                  Subscribe to the suite
                </button>
              </Form>
            ) : (
              <span className="text-slate-600">Ask the operator</span>
            )}
          </li>
        </ul>
      </Card>

      <Card title="Credits">
        <p>
          Balance: <strong data-testid="credit-balance">{credits.balance.toFixed(2)}</strong>{" "}
          credits (1 credit = 1 USD)
        </p>
        {summary.paymentsConfigured ? null : (
          <p className="text-sm text-slate-600">
            Credits are granted by the operator on this server; ask them, or use your own key below.
          </p>
        )}
        <div className="flex flex-wrap gap-3">
          {(summary.paymentsConfigured ? packs : []).map((c) => (
            <Form method="post" key={c.id}>
              <input type="hidden" name="intent" value="credits" />
              <input type="hidden" name="pack" value={c.id} />
              <button
                type="submit"
                className="rounded-md border border-slate-300 bg-white px-3 py-1 text-sm"
              >
                Buy pack {c.id}: {c.credits} credits for ${(c.priceCents / 100).toFixed(2)}
              </button>
            </Form>
          ))}
        </div>
        {credits.entries.length ? (
          <table className="w-full text-left text-sm">
            <thead className="text-slate-500">
              <tr>
                <th className="py-1">When</th>
                <th>What</th>
                <th className="text-right">Credits</th>
              </tr>
            </thead>
            <tbody>
              {credits.entries.map((e) => (
                <tr key={`${e.createdAt}-${e.reason}-${e.amount}`}>
                  <td className="py-1">{new Date(e.createdAt).toUTCString()}</td>
                  <td>{"note" in e && e.note ? `${e.reason}: ${e.note}` : e.reason}</td>
                  <td className="text-right">{e.amount.toFixed(4)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <p className="text-sm text-slate-600">No purchases or usage yet.</p>
        )}
      </Card>

      <Card title="Bring your own key (BYOK)">
        {summary.byok.length ? (
          <ul className="text-sm">
            {summary.byok.map((k) => (
              <li key={k.provider} className="flex items-center justify-between py-1">
                <span>
                  {k.provider}: <code>{k.keyPreview}</code>
                </span>
                <Form method="post">
                  <input type="hidden" name="intent" value="byok-disable" />
                  <input type="hidden" name="provider" value={k.provider} />
                  <button type="submit" className="text-red-700 underline">
                    Remove {k.provider} key
                  </button>
                </Form>
              </li>
            ))}
          </ul>
        ) : (
          <p className="text-sm text-slate-600">AI calls are paid with platform credits.</p>
        )}
        <Form method="post" className="flex flex-wrap items-end gap-3">
          <input type="hidden" name="intent" value="byok-enable" />
          <label className="text-sm">
            Provider
            <select name="provider" className="ml-2 rounded border border-slate-300 px-2 py-1">
              {providers.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </label>
          <label className="text-sm">
            API key
            <input
              name="apiKey"
              type="password"
              required
              minLength={8}
              autoComplete="off"
              className="ml-2 rounded border border-slate-300 px-2 py-1"
            />
          </label>
          <Submit>Use my key</Submit>
        </Form>
        <p className="text-xs text-slate-500">
          The key is checked with the provider first, then stored encrypted.
        </p>
      </Card>

      <Card title="AI usage, last 30 days">
        {usage.length ? (
          <figure>
            {/* SVG bars: heights are attributes, since the pages' CSP allows no inline styles. */}
            <svg
              className="h-32"
              width={usage.length * 16}
              viewBox={`0 0 ${usage.length * 16} 100`}
              preserveAspectRatio="none"
              role="img"
              aria-label="Daily AI cost in USD"
            >
              {usage.map((d, i) => {
                const height = Math.max(2, (d.costUsd / maxCost) * 100);
                return (
                  <rect
                    key={d.day}
                    x={i * 16}
                    y={100 - height}
                    width={12}
                    height={height}
                    className="fill-indigo-500"
                  >
                    <title>{`${d.day}: $${d.costUsd.toFixed(4)}, ${d.calls} calls`}</title>
                  </rect>
                );
              })}
            </svg>
            <figcaption className="text-xs text-slate-500">
              {summary.usage.last30Days.calls} calls, ${summary.usage.last30Days.costUsd.toFixed(4)}
            </figcaption>
          </figure>
        ) : (
          <p className="text-sm text-slate-600">No AI usage yet.</p>
        )}
        <p className="text-sm">
          <Link to="/usage" className="text-indigo-700 underline">
            Tokens and cost per model
          </Link>{" "}
          (daily charts and a table, 7 to 90 days)
        </p>
      </Card>

      <p className="text-sm">
        Storage: {summary.storage.limitGb} GB —{" "}
        <Link to="/files" className="text-indigo-700 underline">
          files dashboard
        </Link>
      </p>
    </div>
  );
}
