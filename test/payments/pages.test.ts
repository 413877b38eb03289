import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import * as bookingsPage from "../../app/routes/bookings.tsx";
import * as opsGateway from "../../app/routes/ops.gateway.tsx";
import * as splitsPage from "../../app/routes/splits.tsx";
import * as walletPage from "../../app/routes/wallet.tsx";
import { ESCROW_OWNER, ensureWallet } from "../../app/server/payments/wallets.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import type { Anvil } from "../identity/anvil.ts";
import { type FiatToken, setNativeBalance } from "./fiat-token.ts";
import { ETH, setUpTestChain } from "./support.ts";

// The wallet, splits, bookings and gateway-price pages: loaders and plain form posts, the way a
// browser without JavaScript uses them.

const chain = setUpTestChain();
let anvil: Anvil;
let usdc: FiatToken;

beforeAll(async () => {
  ({ anvil, usdc } = chain);
  await setNativeBalance(anvil, (await ensureWallet(ESCROW_OWNER)).wallet.address, ETH);
});

type Module = { loader?: unknown; action?: unknown };

async function page(user: string, module: Module, path: string, form?: Record<string, string>) {
  const request = new Request(`http://localhost${path}`, {
    method: form ? "POST" : "GET",
    headers: {
      cookie: await sessionCookieFor(user),
      ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
    },
    ...(form ? { body: new URLSearchParams(form).toString() } : {}),
  });
  const fn = (form ? module.action : module.loader) as (args: object) => Promise<unknown>;
  let result: unknown;
  try {
    result = await fn({ request, params: {}, context: {} });
  } catch (thrown) {
    if (thrown instanceof Response) return { status: thrown.status, data: null };
    throw thrown;
  }
  // Remix `data()` results carry `data` and `init`; loaders answer plain objects.
  const d = result as { data?: unknown; init?: { status?: number } };
  // biome-ignore lint/suspicious/noExplicitAny: reading page data
  const data = (d.init !== undefined ? d.data : result) as any;
  return { status: d.init?.status ?? 200, data };
}

const tokenBalance = (address: Address) => chain.balance(address);

describe("wallet page", () => {
  it("creates the wallet with a plain post and shows its address and balances", async () => {
    expect((await page("usr_pgwallet", walletPage, "/wallet")).data.wallet).toBeNull();
    const created = await page("usr_pgwallet", walletPage, "/wallet", { intent: "create" });
    expect(created.status).toBe(200);
    const address = created.data.value.wallet.address as Address;
    await usdc.mint(address, 1234n);
    const shown = await page("usr_pgwallet", walletPage, "/wallet");
    expect(shown.data.wallet).toMatchObject({
      address,
      balances: { token: { amount: "1234", symbol: "USDC" }, native: { amount: "0" } },
    });
    const again = await page("usr_pgwallet", walletPage, "/wallet", { intent: "create" });
    expect(again.data.value).toMatchObject({ created: false, wallet: { address } });
  });
});

describe("splits page", () => {
  it("defines a split, pays it out and lists the execution; bad recipients are refused", async () => {
    const user = "usr_pgsplit";
    const { wallet } = await ensureWallet(user);
    await usdc.mint(wallet.address, 1_000n);
    await setNativeBalance(anvil, wallet.address, ETH);
    const [a, b] = [anvil.account(5).address, anvil.account(6).address];
    const bad = await page(user, splitsPage, "/splits", {
      intent: "define",
      name: "Band",
      recipients: `${a} 6000\n${b} 3000`,
    });
    expect(bad.status).toBe(400);
    expect(bad.data.error).toMatch(/sum to 10000/);
    const defined = await page(user, splitsPage, "/splits", {
      intent: "define",
      name: "Band",
      recipients: `${a} 6000\n${b} 4000`,
    });
    expect(defined.status).toBe(200);
    const splitId = defined.data.value.defined as string;
    const [aBefore, bBefore] = [await tokenBalance(a), await tokenBalance(b)];
    const run = await page(user, splitsPage, "/splits", {
      intent: "execute",
      splitId,
      amount: "101",
      executionId: "page-run-1",
    });
    expect(run.status, JSON.stringify(run.data)).toBe(200);
    expect(run.data.value.execution).toMatchObject({ status: "completed", paid: "101" });
    expect(await tokenBalance(a)).toBe(aBefore + 61n); // 60.6 floored, plus the remainder
    expect(await tokenBalance(b)).toBe(bBefore + 40n);
    const listed = await page(user, splitsPage, "/splits");
    expect(listed.data.splits.map((s: { id: string }) => s.id)).toEqual([splitId]);
    expect(listed.data.executions[0]).toMatchObject({ id: "page-run-1", status: "completed" });
    const stranger = await page("usr_pgsplitother", splitsPage, "/splits", {
      intent: "execute",
      splitId,
      amount: "1",
    });
    expect(stranger.status).toBe(404);
  });
});

describe("bookings page", () => {
  it("creates, funds and settles a booking; both parties see it, nobody else", async () => {
    const [booker, artist] = ["usr_pgbooker", "usr_pgartist"];
    const { wallet } = await ensureWallet(booker);
    await usdc.mint(wallet.address, 5_000n);
    await setNativeBalance(anvil, wallet.address, ETH);
    await sessionCookieFor(artist);
    const created = await page(booker, bookingsPage, "/bookings", {
      intent: "create",
      artistId: artist,
      amount: "2000",
      terms: "One set",
      startsAt: "2020-01-01T20:00",
      endsAt: "2020-01-01T22:00",
    });
    expect(created.status, JSON.stringify(created.data)).toBe(200);
    const id = created.data.value.booking.id as string;
    expect(created.data.value.booking).toMatchObject({
      status: "created",
      startsAt: "2020-01-01T20:00:00.000Z",
    });
    const funded = await page(booker, bookingsPage, "/bookings", { intent: "fund", bookingId: id });
    expect(funded.data.value.booking.status).toBe("funded");
    // Settled by the booker; a refund after that is an illegal step for anyone (409).
    const settled = await page(booker, bookingsPage, "/bookings", {
      intent: "settle",
      bookingId: id,
    });
    expect(settled.data.value.booking.status).toBe("settled");
    const again = await page(artist, bookingsPage, "/bookings", {
      intent: "refund",
      bookingId: id,
    });
    expect(again.status).toBe(409);
    const artistView = await page(artist, bookingsPage, "/bookings");
    expect(artistView.data.bookings).toEqual([
      expect.objectContaining({ id, role: "artist", status: "settled" }),
    ]);
    const bookerView = await page(booker, bookingsPage, "/bookings");
    expect(bookerView.data.bookings[0]).toMatchObject({ id, role: "booker" });
    expect((await page("usr_pgnobody", bookingsPage, "/bookings")).data.bookings).toEqual([]);
    const nosy = await page("usr_pgnobody", bookingsPage, "/bookings", {
      intent: "settle",
      bookingId: id,
    });
    expect(nosy.status).toBe(404);
  });
});

describe("gateway prices page", () => {
  it("lets an operator change a price (audited) and refuses everyone else", async () => {
    const refused = await page("usr_pgnotop", opsGateway, "/ops/gateway");
    expect(refused.status).toBe(403);
    await sessionCookieFor("usr_pgop");
    await db()`update users set is_operator = true where id = 'usr_pgop'`;
    const listed = await page("usr_pgop", opsGateway, "/ops/gateway");
    expect(listed.data.prices.map((p: { plugin: string }) => p.plugin)).toEqual([
      "agent.chat",
      "ai.completion",
      "skill:*",
    ]);
    // One skill priced by name through the page's second form (decision 0174).
    const skill = await page("usr_pgop", opsGateway, "/ops/gateway", {
      intent: "set-price",
      plugin: "skill:unit-converter",
      priceMicroUsd: "7000",
      enabled: "on",
    });
    expect(skill.status).toBe(303);
    expect(
      (await page("usr_pgop", opsGateway, "/ops/gateway")).data.prices.map(
        (p: { plugin: string }) => p.plugin,
      ),
    ).toContain("skill:unit-converter");
    const set = await page("usr_pgop", opsGateway, "/ops/gateway", {
      intent: "set-price",
      plugin: "agent.chat",
      priceMicroUsd: "25000",
      enabled: "on",
    });
    expect(set.status).toBe(303);
    const [row] = await db()`select price_micro_usd::int as p, updated_by from gateway_plugin_prices
      where plugin = 'agent.chat'`;
    expect(row).toMatchObject({ p: 25_000, updated_by: "usr_pgop" });
    const [audit] = await db()`select actor_type, actor_id from audit_log
      where action = 'gateway.price_changed' and target = 'agent.chat'`;
    expect(audit).toMatchObject({ actor_type: "operator", actor_id: "usr_pgop" });
    const bad = await page("usr_pgop", opsGateway, "/ops/gateway", {
      intent: "set-price",
      plugin: "agent.chat",
      priceMicroUsd: "0",
    });
    expect(bad.status).toBe(400);
  });
});
