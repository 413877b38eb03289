import {
  type ActionFunctionArgs,
  data,
  type LoaderFunctionArgs,
  type MetaFunction,
  redirect,
} from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData, useSearchParams } from "@remix-run/react";
import { Card, Notice, Submit } from "../components/forms.tsx";
import { formatGbp } from "../components/money.ts";
import { SelfHostedPlan } from "../components/self-hosted.tsx";
import { guardAction, requirePageSession } from "../server/accounts/pages.server.ts";
import { listAgents } from "../server/agents/agents.server.ts";
import { providerNames } from "../server/ai/providers/shared.server.ts";
import {
  billingSummary,
  disableByok,
  enableByok,
  recentCredits,
  usageByDay,
} from "../server/billing/account.server.ts";
import { requestAddOn } from "../server/billing/add-ons.server.ts";
import {
  addOns,
  creditPacks,
  enterpriseSuite,
  planIds,
  plans,
} from "../server/billing/catalog.server.ts";
import {
  createCheckout,
  createPortalSession,
  creditCheckoutByPack,
} from "../server/billing/checkout.server.ts";
import {
  changePlan,
  currentPlanSubscription,
  downgradeWarning,
} from "../server/billing/subscriptions.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

export const meta: MetaFunction = () => [{ title: "Billing — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const [summary, usage, credits, agents] = await Promise.all([
    billingSummary(user.id),
    usageByDay(user.id, 30),
    recentCredits(user.id, 10),
    listAgents(user.id),
  ]);
  return {
    summary,
    usage: usage.days,
    credits,
    plans: plans.map((p) => ({
      id: p.id,
      name: p.name,
      pricePence: p.pricePence,
      limits: p.limits,
      // What switching to this plan would leave above its threads (nothing is stopped).
      warning: downgradeWarning(p.id, agents.length) ?? null,
    })),
    agentCount: agents.length,
    addOns: addOns.map((a) => ({
      id: a.id,
      name: a.name,
      pricePence: a.pricePence,
      fulfilment: a.fulfilment,
      gives: a.gives,
    })),
    suite: { name: enterpriseSuite.name, pricePence: enterpriseSuite.pricePence },
    packs: creditPacks.map((c) => ({ id: c.id, credits: c.credits, priceCents: c.priceCents })),
    providers: [...providerNames],
  };
}

const str = (form: FormData, name: string) => String(form.get(name) ?? "");

export async function action({ request }: ActionFunctionArgs) {
  guardAction(request);
  const { user } = await requirePageSession(request);
  const form = await request.formData();
  const intent = str(form, "intent");
  try {
    switch (intent) {
      case "plan": {
        const plan = str(form, "plan");
        if (!(planIds as readonly string[]).includes(plan))
          throw new DomainError(400, "Unknown plan");
        if (await currentPlanSubscription(user.id)) {
          await changePlan(user.id, plan as (typeof planIds)[number]);
          return { ok: `Your plan is now ${plan}.`, error: null };
        }
        throw redirect((await createCheckout(user, "plan", plan)).url, 303);
      }
      case "addon":
        throw redirect((await createCheckout(user, "addon", str(form, "addon"))).url, 303);
      case "request-addon": {
        const { created } = await requestAddOn(user.id, str(form, "addon"), str(form, "note"));
        return {
          ok: created
            ? "Request sent: an operator contacts you. Nothing is charged until you agree."
            : "You have already asked for this; the operator has your request.",
          error: null,
        };
      }
      case "suite":
        throw redirect((await createCheckout(user, "suite", "suite")).url, 303);
      case "credits": {
        const pack = str(form, "pack");
        if (!creditPacks.some((c) => c.id === pack)) throw new DomainError(400, "Unknown pack");
        throw redirect((await creditCheckoutByPack(user, pack as "50")).url, 303);
      }
      case "portal":
        throw redirect((await createPortalSession(user.id)).url, 303);
      case "byok-enable": {
        const provider = str(form, "provider");
        const apiKey = str(form, "apiKey").trim();
        if (!(providerNames as readonly string[]).includes(provider)) {
          throw new DomainError(400, "Unknown provider");
        }
        if (apiKey.length < 8) throw new DomainError(400, "apiKey: enter the whole key");
        await enableByok(user.id, provider as (typeof providerNames)[number], apiKey);
        return {
          ok: `Your ${provider} key is checked and stored; AI calls to ${provider} use it.`,
          error: null,
        };
      }
      case "byok-disable": {
        const provider = str(form, "provider");
        await disableByok(
          user.id,
          (providerNames as readonly string[]).includes(provider)
            ? (provider as (typeof providerNames)[number])
            : undefined,
        );
        return { ok: "Back to platform credits.", error: null };
      }
      default:
        throw new DomainError(400, "Unknown action");
    }
  } catch (error) {
    if (error instanceof Response) throw error;
    if (error instanceof DomainError) {
      return data({ ok: null, error: error.message }, { status: error.status >= 500 ? 503 : 400 });
    }
    throw error;
  }
}

const statusTone: Record<string, string> = {
  active: "bg-emerald-100 text-emerald-800",
  trialing: "bg-emerald-100 text-emerald-800",
  past_due: "bg-amber-100 text-amber-800",
  canceled: "bg-slate-200 text-slate-700",
};

export default function Billing() {
  const { summary, usage, credits, plans, addOns, suite, packs, providers, agentCount } =
    useLoaderData<typeof loader>();
  const result = useActionData<typeof action>();
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
      {result?.ok ? <Notice>{result.ok}</Notice> : null}
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
