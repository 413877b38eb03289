import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import * as route from "../../app/routes/api.skills.booking-settlement.ts";
import { ESCROW_OWNER, ensureWallet } from "../../app/server/payments/wallets.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { openApiPaths } from "../helpers/openapi.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import type { Anvil } from "../identity/anvil.ts";
import { type FiatToken, setNativeBalance } from "./fiat-token.ts";
import { ETH, setUpTestChain } from "./support.ts";

const chain = setUpTestChain({ PAYMENTS_PLATFORM_FEE_BPS: "500" });
let anvil: Anvil;
let usdc: FiatToken;
let escrow: Address;

beforeAll(async () => {
  ({ anvil, usdc } = chain);
  escrow = (await ensureWallet(ESCROW_OWNER)).wallet.address;
  await setNativeBalance(anvil, escrow, ETH);
});

const balance = (address: Address) => chain.balance(address);
const as = async (user: string) => ({ cookie: await sessionCookieFor(user) });
const hour = 3600_000;
const at = (ms: number) => new Date(Date.now() + ms).toISOString();

const fundedBooker = (user: string, tokens: bigint) => chain.fund(user, tokens);

const post = async (user: string, body: Record<string, unknown>) =>
  call(route, "/api/skills/booking-settlement", { method: "POST", headers: await as(user), body });

async function book(booker: string, artist: string, amount: string, startsIn = -2 * hour) {
  const res = await post(booker, {
    action: "create",
    artistId: artist,
    amount,
    terms: "Two sets of 45 minutes, backline provided",
    startsAt: at(startsIn),
    endsAt: at(startsIn + hour),
  });
  expect(res.status, res.text).toBe(201);
  return res.json.booking;
}

const transferCount = async (bookingId: string) =>
  (
    await db()`select count(*)::int as n from payment_transfers where purpose like ${`booking:${bookingId}:%`}`
  )[0]!.n as number;

describe("booking escrow", () => {
  it("creates, funds and settles; both parties see it, nobody else; steps are idempotent", async () => {
    const bookerAddress = await fundedBooker("usr_bkbooker", 3_000_000n);
    await ensureUser("usr_bkartist");
    const created = await book("usr_bkbooker", "usr_bkartist", "1000001");
    expect(created).toMatchObject({
      status: "created",
      role: "booker",
      amount: "1000001",
      platformFee: { bps: 500, amount: "50000" },
      artistPayout: "950001",
      escrowAddress: escrow,
      bookerAddress,
    });
    const id = created.id;

    const artistView = await call(route, `/api/skills/booking-settlement?id=${id}`, {
      headers: await as("usr_bkartist"),
    });
    expect(artistView.json.booking).toMatchObject({ id, role: "artist" });
    const artistAddress = artistView.json.booking.artistAddress as Address;
    for (const action of ["fund", "settle", "refund"]) {
      expect((await post("usr_bkstranger", { action, bookingId: id })).status).toBe(404);
    }
    const strangerGet = await call(route, `/api/skills/booking-settlement?id=${id}`, {
      headers: await as("usr_bkstranger"),
    });
    expect(strangerGet.status).toBe(404);
    const strangerList = await call(route, "/api/skills/booking-settlement", {
      headers: await as("usr_bkstranger"),
    });
    expect(strangerList.json.bookings).toEqual([]);

    // Illegal before funding.
    expect((await post("usr_bkbooker", { action: "settle", bookingId: id })).status).toBe(409);
    expect((await post("usr_bkartist", { action: "refund", bookingId: id })).status).toBe(409);
    expect((await post("usr_bkartist", { action: "fund", bookingId: id })).status).toBe(403);

    const escrowBefore = await balance(escrow);
    const funded = await post("usr_bkbooker", { action: "fund", bookingId: id });
    expect(funded.status).toBe(200);
    expect(funded.json.booking.status).toBe("funded");
    expect(funded.json.booking.transfers.fund[0]).toMatchObject({
      status: "confirmed",
      amount: "1000001",
      to: escrow,
    });
    expect(await balance(escrow)).toBe(escrowBefore + 1_000_001n);
    expect(await balance(bookerAddress)).toBe(3_000_000n - 1_000_001n);
    const again = await post("usr_bkbooker", { action: "fund", bookingId: id });
    expect(again.status).toBe(200);
    expect(again.json.booking.status).toBe("funded");
    expect(await transferCount(id)).toBe(1);
    expect(await balance(bookerAddress)).toBe(3_000_000n - 1_000_001n);

    // The booking started two hours ago: the booker can no longer refund it.
    expect((await post("usr_bkbooker", { action: "refund", bookingId: id })).status).toBe(403);

    const settled = await post("usr_bkbooker", { action: "settle", bookingId: id });
    expect(settled.status).toBe(200);
    expect(settled.json.booking.status).toBe("settled");
    expect(await balance(artistAddress)).toBe(950_001n);
    expect(await balance(escrow)).toBe(escrowBefore + 50_000n);
    expect(
      settled.json.booking.transitions.map((t: { from: string; to: string }) => [t.from, t.to]),
    ).toEqual([
      [null, "created"],
      ["created", "funded"],
      ["funded", "settled"],
    ]);
    expect(settled.json.booking.transitions[2].hash).toBe(
      settled.json.booking.transfers.settle[0].hash,
    );

    const settleAgain = await post("usr_bkartist", { action: "settle", bookingId: id });
    expect(settleAgain.status).toBe(200);
    expect(await balance(artistAddress)).toBe(950_001n);
    expect((await post("usr_bkartist", { action: "refund", bookingId: id })).status).toBe(409);
    expect((await post("usr_bkbooker", { action: "fund", bookingId: id })).status).toBe(409);
    expect(await transferCount(id)).toBe(2);
  });

  it("refunds: the booker before the start, the artist any time; then nothing else", async () => {
    const bookerAddress = await fundedBooker("usr_bkrefunder", 2_000n);
    await ensureUser("usr_bkartist2");
    const future = await book("usr_bkrefunder", "usr_bkartist2", "700", 24 * hour);
    await post("usr_bkrefunder", { action: "fund", bookingId: future.id });
    expect(await balance(bookerAddress)).toBe(1_300n);
    // The artist cannot take the money before the booking ends.
    expect((await post("usr_bkartist2", { action: "settle", bookingId: future.id })).status).toBe(
      403,
    );
    const refunded = await post("usr_bkrefunder", { action: "refund", bookingId: future.id });
    expect(refunded.status).toBe(200);
    expect(refunded.json.booking.status).toBe("refunded");
    expect(await balance(bookerAddress)).toBe(2_000n);
    expect((await post("usr_bkrefunder", { action: "settle", bookingId: future.id })).status).toBe(
      409,
    );
    expect((await post("usr_bkartist2", { action: "refund", bookingId: future.id })).status).toBe(
      200,
    );

    const past = await book("usr_bkrefunder", "usr_bkartist2", "1000");
    await post("usr_bkrefunder", { action: "fund", bookingId: past.id });
    const byArtist = await post("usr_bkartist2", { action: "refund", bookingId: past.id });
    expect(byArtist.json.booking.status).toBe("refunded");
    expect(await balance(bookerAddress)).toBe(2_000n);
  });

  it("pays exactly once when settle and refund race", async () => {
    const bookerAddress = await fundedBooker("usr_bkracer", 1_000n);
    await ensureUser("usr_bkartist3");
    const b = await book("usr_bkracer", "usr_bkartist3", "1000", 24 * hour);
    await post("usr_bkracer", { action: "fund", bookingId: b.id });
    const escrowBefore = await balance(escrow);
    const [settle, refund] = await Promise.all([
      post("usr_bkracer", { action: "settle", bookingId: b.id }),
      post("usr_bkracer", { action: "refund", bookingId: b.id }),
    ]);
    expect([settle.status, refund.status].sort()).toEqual([200, 409]);
    const artist = (await ensureWallet("usr_bkartist3")).wallet.address;
    if (settle.status === 200) {
      expect(await balance(artist)).toBe(950n);
      expect(await balance(escrow)).toBe(escrowBefore - 950n);
    } else {
      expect(await balance(bookerAddress)).toBe(1_000n);
      expect(await balance(escrow)).toBe(escrowBefore - 1_000n);
    }
    expect(await transferCount(b.id)).toBe(2);
  });

  it("refuses with 400 before sending when the booker cannot pay; 503 when the escrow has no gas", async () => {
    await fundedBooker("usr_bkpoor", 10n);
    await ensureUser("usr_bkartist4");
    const b = await book("usr_bkpoor", "usr_bkartist4", "11");
    const res = await post("usr_bkpoor", { action: "fund", bookingId: b.id });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/Insufficient USDC/);
    expect(await transferCount(b.id)).toBe(0);

    await usdc.mint((await ensureWallet("usr_bkpoor")).wallet.address, 1n);
    expect((await post("usr_bkpoor", { action: "fund", bookingId: b.id })).status).toBe(200);
    await setNativeBalance(anvil, escrow, 0n);
    try {
      const noGas = await post("usr_bkpoor", { action: "settle", bookingId: b.id });
      expect(noGas.status).toBe(503);
      expect(await transferCount(b.id)).toBe(1);
      // Nothing was decided: the artist may still refund once the escrow has gas again.
    } finally {
      await setNativeBalance(anvil, escrow, ETH);
    }
    const refund = await post("usr_bkartist4", { action: "refund", bookingId: b.id });
    expect(refund.json.booking.status).toBe("refunded");
  });

  it("keeps a funded booking when a party deletes their account", async () => {
    const bookerAddress = await fundedBooker("usr_bkleaver", 500n);
    await ensureUser("usr_bkartist6");
    const b = await book("usr_bkleaver", "usr_bkartist6", "500");
    await post("usr_bkleaver", { action: "fund", bookingId: b.id });
    await db()`delete from users where id = 'usr_bkleaver'`;
    const seen = await call(route, `/api/skills/booking-settlement?id=${b.id}`, {
      headers: await as("usr_bkartist6"),
    });
    expect(seen.json.booking).toMatchObject({ status: "funded", amount: "500" });
    const refund = await post("usr_bkartist6", { action: "refund", bookingId: b.id });
    expect(refund.json.booking.status).toBe("refunded");
    expect(await balance(bookerAddress)).toBe(500n);
  });

  it("validates bookings", async () => {
    await ensureUser("usr_bkartist5");
    const base = {
      action: "create",
      artistId: "usr_bkartist5",
      amount: "10",
      terms: "DJ set",
      startsAt: at(hour),
      endsAt: at(2 * hour),
    };
    for (const body of [
      { ...base, endsAt: at(0) },
      { ...base, amount: "0" },
      { ...base, amount: "1.5" },
      { ...base, terms: "" },
      { ...base, startsAt: "tomorrow" },
      { ...base, artistId: "usr_bkself" },
      { action: "pay", bookingId: "x" },
    ]) {
      const res = await post("usr_bkself", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(typeof res.json.error).toBe("string");
    }
    expect((await post("usr_bkself", { ...base, artistId: "usr_nobody" })).status).toBe(404);
  });

  it("is in the OpenAPI document", () => {
    const paths = openApiPaths({ "api/skills/booking-settlement": route });
    expect(Object.keys(paths["/api/skills/booking-settlement"]!).sort()).toEqual(["get", "post"]);
  });
});
