import type { LoaderFunctionArgs } from "@remix-run/node";
import { Form, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card } from "../components/forms.tsx";
import { OpsNotices, usd } from "../components/ops.tsx";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";
import { listPluginPrices, setPluginPrice } from "../server/payments/plugin-prices.server.ts";

// The paid gateway's prices per plugin (docs/decisions/0128-paid-plugin-gateway.md); a skill
// gets its own row by naming it, else `skill:*` prices it (0174). setPluginPrice checks names.

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  return { prices: await listPluginPrices() };
}

export const action = opsAction({
  schema: z.object({
    intent: z.literal("set-price"),
    plugin: z.string().trim().max(110),
    priceMicroUsd: z.coerce.number().int(),
    enabled: z.literal("on").optional(),
  }),
  handler: async ({ plugin, priceMicroUsd, enabled }, { operator }) => {
    const set = await setPluginPrice(
      plugin,
      priceMicroUsd,
      { type: "operator", id: operator.id, userId: operator.id },
      enabled === "on",
    );
    return `/ops/gateway?notice=${encodeURIComponent(`${set.plugin}: ${usd(set.priceMicroUsd)} a call`)}`;
  },
});

export default function OpsGateway() {
  const { prices } = useLoaderData<typeof loader>();
  return (
    <Card title="Gateway prices (micro-USD per call)">
      <OpsNotices />
      <table className="w-full text-left text-sm" data-testid="ops-gateway-prices">
        <tbody>
          {prices.map((p) => (
            <tr key={p.plugin} className="border-t border-slate-100">
              <td className="py-1 font-mono">{p.plugin}</td>
              <td>
                <Form method="post" className="flex items-center gap-2">
                  <input type="hidden" name="intent" value="set-price" />
                  <input type="hidden" name="plugin" value={p.plugin} />
                  <input
                    name="priceMicroUsd"
                    type="number"
                    min={1}
                    required
                    defaultValue={p.priceMicroUsd}
                    aria-label={`Price of ${p.plugin} in micro-USD`}
                    className="w-32 rounded border border-slate-300 px-2 py-0.5"
                  />
                  <label className="flex items-center gap-1">
                    <input type="checkbox" name="enabled" defaultChecked={p.enabled} /> offered
                  </label>
                  <button type="submit" className="rounded border border-slate-300 px-2 py-0.5">
                    Save
                  </button>
                </Form>
              </td>
              <td className="text-slate-500">
                {usd(p.priceMicroUsd)} · {p.updatedBy ?? "default"}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Form method="post" className="mt-4 flex items-center gap-2 text-sm">
        <input type="hidden" name="intent" value="set-price" />
        <input
          name="plugin"
          required
          placeholder="skill:<name>"
          aria-label="Skill plugin to price"
          className="w-48 rounded border border-slate-300 px-2 py-0.5 font-mono"
        />
        <input
          name="priceMicroUsd"
          type="number"
          min={1}
          required
          aria-label="Its price in micro-USD"
          className="w-32 rounded border border-slate-300 px-2 py-0.5"
        />
        <label className="flex items-center gap-1">
          <input type="checkbox" name="enabled" defaultChecked /> offered
        </label>
        <button type="submit" className="rounded border border-slate-300 px-2 py-0.5">
          Price one skill
        </button>
      </Form>
    </Card>
  );
}
