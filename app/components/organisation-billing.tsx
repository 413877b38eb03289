import { Form } from "@remix-run/react";
import type { Seats } from "../server/organisations/seats.server.ts";
import { Card } from "./forms.tsx";

// The organisation page's billing section (decision 0215), for roles with billing.manage: its
// billing contact, a plan checkout with extra seats, and the seats bought. Plain forms.

const PLANS = ["solo", "collective", "label", "network"] as const;
const inputClass = "w-20 rounded-md border border-slate-300 px-2 py-1 text-sm";

export function OrganisationBilling({
  seats,
  contact,
  subscribed,
  organisationId,
}: {
  seats: Seats;
  contact: { email: string; name: string } | null;
  subscribed: boolean;
  organisationId: string;
}) {
  return (
    <Card title="Billing and seats">
      <p className="text-sm">
        Billing contact: {contact ? `${contact.name} <${contact.email}>` : "none"} (invoices and
        receipts go there). Seats bought: {seats.paid}.{" "}
        <a href={`/organizations/${organisationId}/usage`} className="text-indigo-700 underline">
          Usage by member and agent
        </a>
      </p>
      {subscribed ? (
        <Form method="post" className="flex items-end gap-3 text-sm">
          <input type="hidden" name="intent" value="seats" />
          <label className="space-y-1">
            <span className="block font-medium">Extra seats bought</span>
            <input
              type="number"
              name="seats"
              min={0}
              max={1000}
              defaultValue={seats.paid}
              className={inputClass}
            />
          </label>
          <button type="submit" className="rounded bg-indigo-600 px-3 py-1 text-white">
            Change seats
          </button>
          <span className="text-xs text-slate-500">
            More are billed now, prorated; fewer stay until the paid period ends.
          </span>
        </Form>
      ) : (
        <Form method="post" className="flex flex-wrap items-end gap-3 text-sm">
          <input type="hidden" name="intent" value="checkout" />
          <label className="space-y-1">
            <span className="block font-medium">Plan</span>
            <select name="plan" className="rounded-md border border-slate-300 px-2 py-1">
              {PLANS.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </label>
          <label className="space-y-1">
            <span className="block font-medium">Extra seats</span>
            <input
              type="number"
              name="seats"
              min={0}
              max={1000}
              defaultValue={0}
              className={inputClass}
            />
          </label>
          <button type="submit" className="rounded bg-indigo-600 px-3 py-1 text-white">
            Subscribe the organisation
          </button>
        </Form>
      )}
    </Card>
  );
}
