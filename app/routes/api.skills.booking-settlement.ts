import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import {
  bookingActionSchema,
  closeBooking,
  createBooking,
  createBookingSchema,
  fundBooking,
  getBooking,
  listBookings,
} from "../server/payments/escrow.server.ts";
import { json } from "../server/platform/http.server.ts";

// Booking escrow and settlement: docs/decisions/0127-booking-escrow.md

const booking =
  "`{booking: {id, role, bookerId, artistId, bookerAddress, artistAddress, escrowAddress, token, amount, platformFee: {bps, amount}, artistPayout, terms, startsAt, endsAt, status, createdAt, transitions: [{from, to, by, hash, at}], transfers: {fund, settle, refund}}}`";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Your bookings, as booker or artist",
    description: `\`{bookings: [...]}\` (latest 100); with \`?id=\` one ${booking}; 404 for a booking you are not a party to.`,
    auth: "user",
    rateLimit: "payments",
    query: z.object({ id: z.string().min(1).max(64).optional() }),
    handler: ({ auth, query }) =>
      query.id ? getBooking(auth.user.id, query.id) : listBookings(auth.user.id),
  }),
  POST: endpoint({
    summary: "Create, fund, settle or refund a booking",
    description: `\`{action: "create", artistId, amount, terms, startsAt, endsAt}\` → 201 ${booking} (amount: integer string in the token's smallest unit; the platform fee is fixed at creation). \`{action: "fund" | "settle" | "refund", bookingId}\` → ${booking}. Fund (booker only) moves the amount from the booker's hosted wallet to the escrow; settle pays the artist the amount minus the fee (the booker, or the artist once the booking has ended); refund returns the amount to the booker (the artist, or the booker before the booking starts). created → funded → settled | refunded only: repeating the step that was done answers 200 unchanged; any other step is 409. 400 when the booker's wallet lacks the token or gas (nothing sent); 403 for a party not allowed the step; 404 for anyone else; 502 when a transfer fails; 503 when the escrow cannot pay gas.`,
    auth: "user",
    rateLimit: "payments",
    body: z.discriminatedUnion("action", [createBookingSchema, bookingActionSchema]),
    handler: async ({ auth, body }) => {
      const userId = auth.user.id;
      if (body.action === "create") {
        return json(await createBooking(userId, body), { status: 201 });
      }
      if (body.action === "fund") return fundBooking(userId, body.bookingId);
      return closeBooking(
        userId,
        body.bookingId,
        body.action === "settle" ? "settled" : "refunded",
      );
    },
  }),
});
