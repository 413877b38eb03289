import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card, Notice } from "../components/forms.tsx";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import {
  closeBooking,
  createBooking,
  createBookingSchema,
  fundBooking,
  listBookings,
} from "../server/payments/escrow.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// Bookings in escrow: create, fund, settle, refund; booker and artist see the same booking, each
// with the steps their role allows (docs/decisions/0127, 0129). Times are entered in UTC.

export const meta: MetaFunction = () => [{ title: "Bookings — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  return listBookings(user.id);
}

/** A datetime-local value ("2026-11-25T20:00") read as UTC, as the service's ISO form. */
const utc = (local: string) => (/[zZ]|[+-]\d\d:\d\d$/.test(local) ? local : `${local}:00Z`);

export const action = /* @__PURE__ */ formAction({
  schema: z.discriminatedUnion("intent", [
    z.object({
      intent: z.literal("create"),
      artistId: z.string().max(64),
      amount: z.string().max(80),
      terms: z.string().max(4000),
      startsAt: z.string().max(40),
      endsAt: z.string().max(40),
    }),
    z.object({
      intent: z.enum(["fund", "settle", "refund"]),
      bookingId: z.string().max(64),
    }),
  ]),
  access: signedIn,
  handler: async ({ session: { user }, value }) => {
    if (value.intent === "create") {
      const parsed = createBookingSchema.safeParse({
        action: "create",
        artistId: value.artistId,
        amount: value.amount,
        terms: value.terms,
        startsAt: utc(value.startsAt),
        endsAt: utc(value.endsAt),
      });
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new DomainError(400, `${issue?.path.join(".") || "form"}: ${issue?.message}`);
      }
      return createBooking(user.id, parsed.data);
    }
    if (value.intent === "fund") return fundBooking(user.id, value.bookingId);
    return closeBooking(
      user.id,
      value.bookingId,
      value.intent === "settle" ? "settled" : "refunded",
    );
  },
});

function Step({ intent, id }: { intent: "fund" | "settle" | "refund"; id: string }) {
  return (
    <Form method="post" className="inline">
      <input type="hidden" name="intent" value={intent} />
      <input type="hidden" name="bookingId" value={id} />
      <button type="submit" className="rounded border px-2 py-0.5 text-xs">
        {intent}
      </button>
    </Form>
  );
}

export default function Bookings() {
  const { bookings } = useLoaderData<typeof loader>();
  const done = useActionData<typeof action>();
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Bookings</h1>
      {done?.error ? <Notice tone="error">{done.error}</Notice> : null}
      {done?.value ? (
        <Notice>
          Booking {done.value.booking.id}: {done.value.booking.status}
        </Notice>
      ) : null}
      <Card title="Book an artist">
        <Form method="post" className="grid gap-2 text-sm">
          <input type="hidden" name="intent" value="create" />
          <label>
            Artist (user id) <input name="artistId" required className="rounded border px-2" />
          </label>
          <label>
            Amount (smallest unit){" "}
            <input name="amount" required inputMode="numeric" className="rounded border px-2" />
          </label>
          <label>
            Terms{" "}
            <textarea name="terms" required rows={3} className="block w-full rounded border" />
          </label>
          <label>
            Starts (UTC) <input name="startsAt" type="datetime-local" required />
          </label>
          <label>
            Ends (UTC) <input name="endsAt" type="datetime-local" required />
          </label>
          <button type="submit" className="w-fit rounded-md bg-slate-900 px-3 py-1.5 text-white">
            Create booking
          </button>
        </Form>
      </Card>
      <Card title="Your bookings">
        {bookings.length === 0 ? (
          <p className="text-sm text-slate-600">No bookings yet.</p>
        ) : (
          <table className="w-full text-left text-sm" data-testid="bookings">
            <tbody>
              {bookings.map((b) => (
                <tr key={b.id} className="border-t align-top">
                  <td>{b.id}</td>
                  <td>
                    {b.role === "booker" ? `you book ${b.artistId}` : `${b.bookerId} books you`}
                  </td>
                  <td>
                    {b.amount} (fee {b.platformFee.amount}, artist gets {b.artistPayout})
                  </td>
                  <td>
                    {b.startsAt.slice(0, 16)} – {b.endsAt.slice(0, 16)}
                  </td>
                  <td>{b.status}</td>
                  <td className="space-x-1 whitespace-nowrap">
                    {b.status === "created" && b.role === "booker" ? (
                      <Step intent="fund" id={b.id} />
                    ) : null}
                    {b.status === "funded" ? (
                      <>
                        <Step intent="settle" id={b.id} />
                        <Step intent="refund" id={b.id} />
                      </>
                    ) : null}
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
