import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import * as walletRoute from "../../app/routes/api.wallet.ts";
import * as walletPage from "../../app/routes/wallet.tsx";
import { formatUnitsExact, parseDecimalAmount } from "../../app/server/payments/amounts.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { openApiPaths } from "../helpers/openapi.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { ETH, setUpTestChain } from "./support.ts";

// Sending from the hosted wallet (decision 0173): the API action and the page's review and
// confirmation, on anvil with the real FiatToken; every send in the ledger, once per key.

const chain = setUpTestChain();

const newAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const as = async (user: string) => ({ cookie: await sessionCookieFor(user) });
const send = async (user: string, body: Record<string, unknown>) =>
  call(walletRoute, "/api/wallet", {
    method: "POST",
    headers: await as(user),
    body: { action: "send", ...body },
  });
const transfers = (user: string) =>
  db()<{ purpose: string; token: string; amount: string; status: string; to_address: string }[]>`
    select purpose, token, amount::text, status, to_address from payment_transfers
    where from_owner = ${user} order by created_at`;
const nativeOf = (address: Address) => chain.anvil.client.getBalance({ address });

describe("decimal amounts", () => {
  it("turns typed decimals into smallest units exactly and refuses what does not fit", () => {
    expect(parseDecimalAmount("1.25", 6)).toBe(1_250_000n);
    expect(parseDecimalAmount("0.000001", 6)).toBe(1n);
    expect(parseDecimalAmount("7", 0)).toBe(7n);
    // Beyond a double's precision: still exact.
    expect(parseDecimalAmount("123456789012345678901.123456789012345678", 18)).toBe(
      123456789012345678901123456789012345678n,
    );
    for (const [text, why] of [
      ["1.0000001", "more than 6 decimals"],
      ["0", "more than zero"],
      ["0.000000", "more than zero"],
      ["-1", "like 12 or 0.5"],
      ["1e3", "like 12 or 0.5"],
      [".5", "like 12 or 0.5"],
      ["1,5", "like 12 or 0.5"],
    ] as const) {
      expect(() => parseDecimalAmount(text, 6), text).toThrow(why);
    }
    expect(formatUnitsExact(1_250_000n, 6)).toBe("1.25");
    expect(formatUnitsExact(1n, 18)).toBe("0.000000000000000001");
    expect(formatUnitsExact(5_000_000n, 6)).toBe("5");
  });
});

describe("POST /api/wallet {action: send}", () => {
  it("sends the token once per idempotency key, recorded and confirmed", async () => {
    const user = "usr_sendtoken";
    await ensureUser(user);
    const from = await chain.fund(user, 2_000_000n);
    const to = newAddress();
    const body = { asset: "token", to, amount: "1250000", idempotencyKey: "rent-2026-11" };

    const first = await send(user, body);
    expect(first.status).toBe(200);
    expect(first.json.send).toMatchObject({
      id: "rent-2026-11",
      asset: "token",
      token: chain.usdc.address,
      to,
      amount: "1250000",
      status: "confirmed",
    });
    expect(first.json.send.hash).toMatch(/^0x[0-9a-f]{64}$/);
    const receipt = await chain.anvil.client.getTransactionReceipt({ hash: first.json.send.hash });
    expect(receipt.status).toBe("success");
    expect(await chain.balance(to)).toBe(1_250_000n);
    expect(await chain.balance(from)).toBe(750_000n);

    // A retry with the same key pays nothing more and answers the same send.
    const again = await send(user, body);
    expect(again.status).toBe(200);
    expect(again.json.send.hash).toBe(first.json.send.hash);
    expect(await chain.balance(to)).toBe(1_250_000n);
    expect(await transfers(user)).toEqual([
      {
        purpose: `send:${user}:rent-2026-11`,
        token: chain.usdc.address,
        amount: "1250000",
        status: "confirmed",
        to_address: to,
      },
    ]);
    // The key with another send is a conflict, not a second payment.
    const other = await send(user, { ...body, amount: "1" });
    expect(other.status).toBe(409);
    expect(await chain.balance(from)).toBe(750_000n);

    const audit = await db()<
      { outcome: string; target: string; details: Record<string, string> }[]
    >`
      select outcome, target, details from audit_log where action = 'wallet.sent' and user_id = ${user}`;
    expect(audit).toEqual([
      {
        outcome: "success",
        target: to,
        details: {
          asset: "token",
          contract: chain.usdc.address,
          amount: "1250000",
          idempotencyKey: "rent-2026-11",
          status: "confirmed",
        },
      },
    ]);
  });

  it("sends the native coin: the recipient gets exactly the amount, the sender pays it and gas", async () => {
    const user = "usr_sendnative";
    await ensureUser(user);
    const from = await chain.fund(user, 0n, ETH);
    const to = newAddress();
    const amount = 123_456_789_000_000_007n;
    const res = await send(user, {
      asset: "native",
      to,
      amount: amount.toString(),
      idempotencyKey: "gift",
    });
    expect(res.status).toBe(200);
    expect(res.json.send).toMatchObject({ asset: "native", token: "native", status: "confirmed" });
    expect(await nativeOf(to)).toBe(amount);
    const receipt = await chain.anvil.client.getTransactionReceipt({ hash: res.json.send.hash });
    expect(await nativeOf(from)).toBe(ETH - amount - receipt.gasUsed * receipt.effectiveGasPrice);
    expect((await transfers(user))[0]).toMatchObject({ token: "native", status: "confirmed" });
  });

  it("refuses with 400 before anything is recorded or sent when balance or gas is short", async () => {
    const user = "usr_sendpoor";
    await ensureUser(user);
    const from = await chain.fund(user, 100n, ETH);
    const to = newAddress();
    const tooMuch = await send(user, {
      asset: "token",
      to,
      amount: "101",
      idempotencyKey: "k1",
    });
    expect(tooMuch.status).toBe(400);
    expect(tooMuch.json).toMatchObject({ balance: "100", required: "101" });

    // All of the native balance leaves nothing for gas.
    const everything = await send(user, {
      asset: "native",
      to,
      amount: ETH.toString(),
      idempotencyKey: "k2",
    });
    expect(everything.status).toBe(400);
    expect(everything.json.error).toMatch(/for gas/);

    await chain.setNative(from, 0n);
    const noGas = await send(user, { asset: "token", to, amount: "100", idempotencyKey: "k3" });
    expect(noGas.status).toBe(400);
    expect(noGas.json).toMatchObject({ nativeBalance: "0" });

    // A transfer the token would revert (blacklisted recipient) is refused up front too.
    await chain.setNative(from, ETH);
    const banned = newAddress();
    await chain.usdc.blacklist(banned);
    const reverted = await send(user, {
      asset: "token",
      to: banned,
      amount: "1",
      idempotencyKey: "k4",
    });
    expect(reverted.status).toBe(400);
    expect(reverted.json.error).toMatch(/would fail/);

    expect(await transfers(user)).toEqual([]);
    expect((await db()`select 1 from wallet_sends where user_id = ${user}`).length).toBe(0);
    expect(await chain.balance(to)).toBe(0n);
  });

  it("answers bad input with 400, no wallet with 404 and no credential with 401", async () => {
    const user = "usr_sendbad";
    await ensureUser(user);
    const good = { asset: "token", to: newAddress(), amount: "1", idempotencyKey: "x" };
    expect((await send(user, good)).status).toBe(404);
    const from = await chain.fund(user, 10n);
    for (const [patch, field] of [
      [{ amount: "1.5" }, "amount"],
      [{ amount: 0 }, "amount"],
      [{ to: "0x1234" }, "to"],
      [{ asset: "btc" }, "asset"],
      [{ idempotencyKey: "has space" }, "idempotencyKey"],
      [{ idempotencyKey: undefined }, "idempotencyKey"],
      [{ extra: 1 }, ""],
    ] as const) {
      const res = await send(user, { ...good, ...patch });
      expect(res.status, JSON.stringify(patch)).toBe(400);
      expect(res.json.error, JSON.stringify(patch)).toContain(field);
    }
    const self = await send(user, { ...good, to: from });
    expect(self.status).toBe(400);
    expect(self.json.error).toMatch(/own address/);
    const anonymous = await call(walletRoute, "/api/wallet", {
      method: "POST",
      body: { action: "send", ...good },
    });
    expect(anonymous.status).toBe(401);
    expect(await transfers(user)).toEqual([]);
  });

  it("documents the send action in the OpenAPI document", () => {
    const post = openApiPaths({ "api/wallet": walletRoute })["/api/wallet"]!.post;
    expect(post.summary).toMatch(/send/);
    expect(post.description).toMatch(/idempotencyKey/);
    expect(JSON.stringify(post.requestBody)).toContain('"send"');
  });
});

describe("wallet page: send", () => {
  it("reviews a typed decimal amount, then sends once on confirmation, without JavaScript", async () => {
    const user = "usr_sendpage";
    await ensureUser(user);
    const who = await as(user);
    const from = await chain.fund(user, 5_000_000n);
    const to = newAddress();

    const shown = await page(walletPage, "/wallet", who);
    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    const loaded = shown.body as any;
    expect(loaded.sends).toEqual([]);

    const tooPrecise = await page(walletPage, "/wallet", who, {
      intent: "review",
      asset: "token",
      to,
      amount: "1.0000001",
    });
    expect(tooPrecise.status).toBe(400);
    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    expect((tooPrecise.body as any).result.error.amount).toEqual(["has more than 6 decimals"]);
    const badTo = await page(walletPage, "/wallet", who, {
      intent: "review",
      asset: "token",
      to: "nobody",
      amount: "1",
    });
    expect(badTo.status).toBe(400);
    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    expect((badTo.body as any).result.error.to).toBeDefined();
    const short = await page(walletPage, "/wallet", who, {
      intent: "review",
      asset: "token",
      to,
      amount: "6",
    });
    expect(short.status).toBe(400);
    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    expect((short.body as any).error).toMatch(/Insufficient USDC/);

    const reviewed = await page(walletPage, "/wallet", who, {
      intent: "review",
      asset: "token",
      to,
      amount: "1.25",
    });
    expect(reviewed.status).toBe(200);
    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    const review = (reviewed.body as any).value.review;
    expect(review).toMatchObject({ asset: "token", to, amount: "1250000", shown: "1.25 USDC" });
    expect(review.idempotencyKey).toMatch(/^snd_/);
    // Reviewing sends nothing.
    expect(await chain.balance(to)).toBe(0n);
    expect(await transfers(user)).toEqual([]);

    const confirm = {
      intent: "send",
      asset: review.asset,
      to: review.to,
      amount: review.amount,
      idempotencyKey: review.idempotencyKey,
    };
    const sent = await page(walletPage, "/wallet", who, confirm);
    expect(sent.status).toBe(200);
    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    expect((sent.body as any).value.send).toMatchObject({ status: "confirmed", to });
    // The confirmation posted twice (a double click, a reload) sends once.
    const twice = await page(walletPage, "/wallet", who, confirm);
    expect(twice.status).toBe(200);
    expect(await chain.balance(to)).toBe(1_250_000n);
    expect(await chain.balance(from)).toBe(3_750_000n);

    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    const after = (await page(walletPage, "/wallet", who)).body as any;
    expect(after.sends).toHaveLength(1);
    expect(after.sends[0]).toMatchObject({ amount: "1250000", status: "confirmed", to });
    expect(after.wallet.balances.token.amount).toBe("3750000");
  });

  it("sends the native coin from the page with its 18 decimals", async () => {
    const user = "usr_sendpagenative";
    await ensureUser(user);
    const who = await as(user);
    await chain.fund(user, 0n, ETH);
    const to = newAddress();
    const reviewed = await page(walletPage, "/wallet", who, {
      intent: "review",
      asset: "native",
      to,
      amount: "0.100000000000000003",
    });
    // biome-ignore lint/suspicious/noExplicitAny: reading page data
    const review = (reviewed.body as any).value.review;
    expect(review.amount).toBe("100000000000000003");
    expect(review.shown).toBe("0.100000000000000003 ETH");
    const sent = await page(walletPage, "/wallet", who, { intent: "send", ...review });
    expect(sent.status).toBe(200);
    expect(await nativeOf(to)).toBe(100_000_000_000_000_003n);
  });
});
