import type { Address } from "viem";
import { z } from "zod";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";
import { newId } from "../platform/ids.server.ts";
import { amountSchema } from "./amounts.server.ts";
import { TOTAL_BPS } from "./shares.server.ts";
import { paymentToken } from "./token.server.ts";
import {
  assertCanPay,
  type Leg,
  payLeg,
  reconcileLeg,
  transfersOf,
  withSenderLock,
} from "./transfers.server.ts";
import { ESCROW_OWNER, ensureWallet } from "./wallets.server.ts";

// Booking escrow: a booker books an artist for an amount; funding moves it from the booker's
// hosted wallet into the escrow wallet the platform controls; settling pays the artist the
// amount minus the platform fee (the fee stays in escrow); refunding returns it all to the
// booker. created → funded → settled | refunded, nothing else; each transition is recorded with
// its transfer and repeating it is harmless. Only the two parties see a booking.
// docs/decisions/0127-booking-escrow.md

export type BookingStatus = "created" | "funded" | "settled" | "refunded";
type Outcome = "settled" | "refunded";

const when = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

export const createBookingSchema = z
  .object({
    action: z.literal("create"),
    artistId: z.string().min(1).max(64),
    amount: amountSchema,
    terms: z.string().trim().min(1).max(4000),
    startsAt: when,
    endsAt: when,
  })
  .strict()
  .refine((b) => b.endsAt >= b.startsAt, { message: "endsAt must not be before startsAt" });

export const bookingActionSchema = z
  .object({
    action: z.enum(["fund", "settle", "refund"]),
    bookingId: z.string().min(1).max(64),
  })
  .strict();

interface BookingRow {
  id: string;
  booker_id: string;
  artist_id: string;
  artist_address: string;
  booker_address: string;
  escrow_address: string;
  token: string;
  amount: string;
  fee_bps: number;
  fee_amount: string;
  terms: string;
  starts_at: Date;
  ends_at: Date;
  status: BookingStatus;
  closing: Outcome | null;
  created_at: Date;
}

interface TransitionRow {
  from_status: string | null;
  to_status: string;
  by_user: string;
  transfer_hash: string | null;
  at: Date;
}

const purposeOf = (id: string, step: "fund" | "settle" | "refund") => `booking:${id}:${step}`;

async function bookingView(row: BookingRow, userId: string) {
  const transitions = await db()<TransitionRow[]>`
    select from_status, to_status, by_user, transfer_hash, at from booking_transitions
    where booking_id = ${row.id} order by at`;
  const transfers = {
    fund: await transfersOf(purposeOf(row.id, "fund")),
    settle: await transfersOf(purposeOf(row.id, "settle")),
    refund: await transfersOf(purposeOf(row.id, "refund")),
  };
  const amount = BigInt(row.amount);
  const fee = BigInt(row.fee_amount);
  return {
    id: row.id,
    role: row.booker_id === userId ? "booker" : "artist",
    bookerId: row.booker_id,
    artistId: row.artist_id,
    bookerAddress: row.booker_address,
    artistAddress: row.artist_address,
    escrowAddress: row.escrow_address,
    token: row.token,
    amount: row.amount,
    platformFee: { bps: row.fee_bps, amount: row.fee_amount },
    artistPayout: (amount - fee).toString(),
    terms: row.terms,
    startsAt: row.starts_at.toISOString(),
    endsAt: row.ends_at.toISOString(),
    status: row.status,
    createdAt: row.created_at.toISOString(),
    transitions: transitions.map((t) => ({
      from: t.from_status,
      to: t.to_status,
      by: t.by_user,
      hash: t.transfer_hash,
      at: t.at.toISOString(),
    })),
    transfers,
  };
}

/** A booking the user is a party to; anyone else gets 404. */
async function partyBooking(userId: string, bookingId: string): Promise<BookingRow> {
  const [row] = await db()<BookingRow[]>`
    select * from bookings
    where id = ${bookingId} and (booker_id = ${userId} or artist_id = ${userId})`;
  if (!row) throw notFound("Booking");
  return row;
}

export async function getBooking(userId: string, bookingId: string) {
  return { booking: await bookingView(await partyBooking(userId, bookingId), userId) };
}

export async function listBookings(userId: string) {
  const rows = await db()<BookingRow[]>`
    select * from bookings where booker_id = ${userId} or artist_id = ${userId}
    order by created_at desc limit 100`;
  return { bookings: await Promise.all(rows.map((r) => bookingView(r, userId))) };
}

export async function createBooking(userId: string, input: z.infer<typeof createBookingSchema>) {
  if (input.artistId === userId) throw new DomainError(400, "You cannot book yourself");
  const [artist] = await db()`select id from users where id = ${input.artistId}`;
  if (!artist) throw notFound("Artist");
  const token = await paymentToken();
  const [booker, artistWallet, escrow] = await Promise.all([
    ensureWallet(userId),
    ensureWallet(input.artistId),
    ensureWallet(ESCROW_OWNER),
  ]);
  const feeBps = env().PAYMENTS_PLATFORM_FEE_BPS;
  const fee = (input.amount * BigInt(feeBps)) / TOTAL_BPS;
  const id = newId("bkg");
  const row = await db().begin(async (tx) => {
    const [inserted] = await tx<BookingRow[]>`
      insert into bookings (id, booker_id, artist_id, artist_address, booker_address,
        escrow_address, token, amount, fee_bps, fee_amount, terms, starts_at, ends_at)
      values (${id}, ${userId}, ${input.artistId}, ${artistWallet.wallet.address},
        ${booker.wallet.address}, ${escrow.wallet.address}, ${token.address},
        ${input.amount.toString()}, ${feeBps}, ${fee.toString()}, ${input.terms},
        ${input.startsAt}, ${input.endsAt})
      returning *`;
    await tx`insert into booking_transitions (booking_id, from_status, to_status, by_user)
      values (${id}, null, 'created', ${userId})`;
    return inserted!;
  });
  return { booking: await bookingView(row, userId) };
}

/** Moves a booking `from` → `to` once, recording who did it and the transfer that did it. */
async function transition(
  id: string,
  from: BookingStatus,
  to: BookingStatus,
  by: string,
  purpose: string,
) {
  const [paid] = await db()<{ tx_hash: string }[]>`
    select tx_hash from payment_transfers where purpose = ${purpose} and status = 'confirmed'`;
  await db().begin(async (tx) => {
    const moved = await tx`update bookings set status = ${to}, updated_at = now()
      where id = ${id} and status = ${from}`;
    if (moved.count === 1) {
      await tx`insert into booking_transitions (booking_id, from_status, to_status, by_user, transfer_hash)
        values (${id}, ${from}, ${to}, ${by}, ${paid?.tx_hash ?? null})`;
    }
  });
}

const illegal = (row: BookingRow, action: string) =>
  new DomainError(409, `The booking is ${row.status}; it cannot be ${action}`);

/** Runs a payment step: reconcile, preflight, pay, and move the booking when it confirmed. */
async function payStep(
  row: BookingRow,
  userId: string,
  leg: Leg | undefined,
  from: BookingStatus,
  to: BookingStatus,
  preflight: (legs: Leg[]) => Promise<void>,
) {
  if (leg) {
    let standing = await reconcileLeg(leg.purpose, 0);
    if (standing === "unpaid") {
      await preflight([leg]);
      standing = (await payLeg(leg)) === "confirmed" ? "confirmed" : "unpaid";
      const [live] = await db()`select 1 from payment_transfers
        where purpose = ${leg.purpose} and status = 'pending'`;
      if (live) standing = "pending";
    }
    if (standing === "unpaid") {
      const view = await bookingView(await partyBooking(userId, row.id), userId);
      throw new DomainError(
        502,
        "The transfer failed; nothing moved on the booking. Try the same action again.",
        { booking: view },
      );
    }
    if (standing === "pending") {
      return { booking: await bookingView(await partyBooking(userId, row.id), userId) };
    }
  }
  await transition(row.id, from, to, userId, leg?.purpose ?? "");
  return { booking: await bookingView(await partyBooking(userId, row.id), userId) };
}

export async function fundBooking(userId: string, bookingId: string) {
  const first = await partyBooking(userId, bookingId);
  if (first.booker_id !== userId) throw new DomainError(403, "Only the booker funds a booking");
  return withSenderLock(first.booker_address, async () => {
    const row = await partyBooking(userId, bookingId);
    if (row.status === "funded") return { booking: await bookingView(row, userId) };
    if (row.status !== "created") throw illegal(row, "funded");
    const leg: Leg = {
      purpose: purposeOf(row.id, "fund"),
      leg: 0,
      fromOwner: row.booker_id,
      to: row.escrow_address as Address,
      amount: BigInt(row.amount),
    };
    return payStep(row, userId, leg, "created", "funded", (legs) =>
      assertCanPay(row.booker_id, legs),
    );
  });
}

/** Who may close a booking which way (decision 0127). */
function assertMayClose(row: BookingRow, userId: string, outcome: Outcome, now = new Date()) {
  const booker = row.booker_id === userId;
  if (outcome === "settled" && !booker && now < row.ends_at) {
    throw new DomainError(403, "The artist can settle only after the booking ends");
  }
  if (outcome === "refunded" && booker && now >= row.starts_at) {
    throw new DomainError(403, "Once the booking has started only the artist can refund it");
  }
}

export async function closeBooking(userId: string, bookingId: string, outcome: Outcome) {
  const verb = outcome === "settled" ? "settled" : "refunded";
  const first = await partyBooking(userId, bookingId);
  return withSenderLock(first.escrow_address, async () => {
    const row = await partyBooking(userId, bookingId);
    if (row.status === outcome) return { booking: await bookingView(row, userId) };
    if (row.status !== "funded") throw illegal(row, verb);
    if (row.closing && row.closing !== outcome) {
      throw new DomainError(409, `The booking is already being ${row.closing}`);
    }
    assertMayClose(row, userId, outcome);
    const amount = BigInt(row.amount);
    const payout = outcome === "settled" ? amount - BigInt(row.fee_amount) : amount;
    const leg: Leg | undefined =
      payout > 0n
        ? {
            purpose: purposeOf(row.id, outcome === "settled" ? "settle" : "refund"),
            leg: 0,
            fromOwner: ESCROW_OWNER,
            to: (outcome === "settled" ? row.artist_address : row.booker_address) as Address,
            amount: payout,
          }
        : undefined;
    return payStep(row, userId, leg, "funded", outcome, async (legs) => {
      try {
        await assertCanPay(ESCROW_OWNER, legs);
      } catch (error) {
        if (error instanceof DomainError && error.status === 400) {
          // The escrow is the platform's: its shortfall is an operator's problem, not the user's.
          throw new DomainError(503, `The escrow wallet cannot pay now: ${error.message}`);
        }
        throw error;
      }
      // The outcome is fixed before money moves, so a settle and a refund never both pay.
      const claimed = await db()`update bookings set closing = ${outcome}
        where id = ${row.id} and status = 'funded' and (closing is null or closing = ${outcome})`;
      if (claimed.count !== 1) throw new DomainError(409, "The booking is being closed otherwise");
    });
  });
}
