import type { MetaFunction } from "@remix-run/node";
import { Link, useLoaderData } from "@remix-run/react";
import { formatGbp } from "../components/money.ts";
import { SelfHostedPricing } from "../components/self-hosted.tsx";
import {
  addOns,
  creditPacks,
  enterpriseSuite,
  plans,
  priceIdOf,
} from "../server/billing/catalog.server.ts";
import { defaultPlan, selfHosted } from "../server/billing/plan-assignments.server.ts";
import { env } from "../server/platform/env.server.ts";

export const meta: MetaFunction = () => [{ title: "Pricing — Agent Platform" }];

// Public: plans, add-ons, the enterprise suite and credit packs. Buying is plain links and
// forms (GET /api/pay/checkout, GET /api/pay/credits), so it works without JavaScript.
export function loader() {
  return {
    // Self-hosted mode (decision 0100): nothing is sold; the page says who gives plans instead.
    selfHosted: selfHosted()
      ? { contact: env().OPERATOR_CONTACT ?? null, defaultPlan: defaultPlan() }
      : null,
    plans: plans.map(({ id, name, pricePence, features }) => ({ id, name, pricePence, features })),
    addOns: addOns.map(({ id, name, pricePence, fulfilment, gives }) => ({
      id,
      name,
      pricePence,
      fulfilment,
      gives,
    })),
    suite: {
      name: enterpriseSuite.name,
      pricePence: enterpriseSuite.pricePence,
      features: enterpriseSuite.features,
    },
    packs: creditPacks.map((c) => ({
      id: c.id,
      credits: c.credits,
      priceCents: c.priceCents,
      price: priceIdOf(c.priceVar) ?? null,
    })),
  };
}

export default function Pricing() {
  const { plans, addOns, suite, packs, selfHosted } = useLoaderData<typeof loader>();
  return (
    <div className="space-y-10">
      <header className="space-y-2">
        <h1 className="text-2xl font-semibold">Pricing</h1>
        <p className="text-sm text-slate-600">Billed monthly in GBP. There is no yearly billing.</p>
      </header>
      {selfHosted ? <SelfHostedPricing facts={selfHosted} /> : null}

      <section aria-labelledby="plans" className="space-y-4">
        <h2 id="plans" className="text-lg font-semibold">
          Plans
        </h2>
        <ul className="grid gap-4 md:grid-cols-4">
          {plans.map((p) => (
            <li
              key={p.id}
              data-plan={p.id}
              className="flex flex-col gap-3 rounded-lg border border-slate-200 bg-white p-5"
            >
              <h3 className="font-semibold">{p.name}</h3>
              <p className="text-2xl font-semibold">
                {formatGbp(p.pricePence)}
                <span className="text-sm font-normal text-slate-500">/mo</span>
              </p>
              <ul className="flex-1 list-disc pl-5 text-sm text-slate-700">
                {p.features.map((f) => (
                  <li key={f}>{f}</li>
                ))}
              </ul>
              {p.id === "network" ? (
                // Decision 0207: branding is delivered; reselling to customers of one's own is not.
                <p className="text-xs text-slate-500">
                  White-label today: your organisation's name, logo and sender on its emails.
                  Reselling to customers of your own is not available yet.
                </p>
              ) : null}
              {selfHosted ? (
                <p className="text-sm text-slate-600">Given by the operator here</p>
              ) : (
                <a
                  href={`/api/pay/checkout?plan=${p.id}`}
                  className="rounded-md bg-indigo-600 px-3 py-2 text-center text-sm font-medium text-white hover:bg-indigo-700"
                >
                  Subscribe to {p.name}
                </a>
              )}
            </li>
          ))}
        </ul>
      </section>

      <section aria-labelledby="addons" className="space-y-4">
        <h2 id="addons" className="text-lg font-semibold">
          Add-ons
        </h2>
        <p className="text-sm text-slate-600">
          Monthly, on top of any plan. Audit Logs is bought; the others have nothing automatic
          behind them, so you request them and an operator agrees the details and the price with you
          before anything is charged. Both from your{" "}
          <Link to="/billing" className="text-indigo-700 underline">
            billing page
          </Link>
          .
        </p>
        <table className="w-full text-left text-sm">
          <tbody className="divide-y divide-slate-100">
            {addOns.map((a) => (
              <tr key={a.id} data-addon={a.id}>
                <td className="py-2 pr-4 align-top">{a.name}</td>
                <td className="py-2 text-slate-600">{a.gives}</td>
                <td className="py-2 text-right align-top">
                  {a.fulfilment === "request" ? "on request" : `${formatGbp(a.pricePence)}/mo`}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>

      <section
        aria-labelledby="suite"
        className="space-y-3 rounded-lg border border-slate-200 bg-white p-5"
      >
        <h2 id="suite" className="text-lg font-semibold">
          {suite.name} — {formatGbp(suite.pricePence)}/mo
        </h2>
        <ul className="list-disc pl-5 text-sm text-slate-700">
          {suite.features.map((f) => (
            <li key={f}>{f}</li>
          ))}
        </ul>
        {selfHosted ? null : (
          <Link to="/billing" className="text-sm text-indigo-700 underline">
            Subscribe from your billing page
          </Link>
        )}
      </section>

      <section aria-labelledby="credits" className="space-y-4">
        <h2 id="credits" className="text-lg font-semibold">
          Credit packs
        </h2>
        <p className="text-sm text-slate-600">1 credit = 1 USD of AI usage.</p>
        <ul className="grid gap-4 md:grid-cols-3">
          {packs.map((c) => (
            <li key={c.id} className="space-y-2 rounded-lg border border-slate-200 bg-white p-5">
              <h3 className="font-semibold">Pack {c.id}</h3>
              <p className="text-sm">
                {c.credits} credits for ${(c.priceCents / 100).toFixed(2)}
              </p>
              {selfHosted ? (
                <span className="text-sm text-slate-500">Granted by the operator here</span>
              ) : c.price ? (
                <a
                  href={`/api/pay/credits?price=${encodeURIComponent(c.price)}`}
                  className="text-sm text-indigo-700 underline"
                >
                  Buy pack {c.id}
                </a>
              ) : (
                <span className="text-sm text-slate-500">Not on sale yet</span>
              )}
            </li>
          ))}
        </ul>
      </section>
    </div>
  );
}
