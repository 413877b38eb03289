import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import * as splitRoute from "../../app/routes/api.skills.instant-split.ts";
import { splitShares } from "../../app/server/payments/shares.server.ts";
import { ensureWallet } from "../../app/server/payments/wallets.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { openApiPaths } from "../helpers/openapi.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import type { Anvil } from "../identity/anvil.ts";
import type { FiatToken } from "./fiat-token.ts";
import { setUpTestChain } from "./support.ts";

const chain = setUpTestChain();
let anvil: Anvil;
let usdc: FiatToken;

beforeAll(async () => {
  ({ anvil, usdc } = chain);
});

const newAddress = () => privateKeyToAccount(generatePrivateKey()).address;
const balance = (address: Address) => chain.balance(address);

/** A user with a hosted wallet holding `tokens` USDC units and 1 ETH for gas. */
async function funded(userId: string, tokens: bigint, wei = 10n ** 18n) {
  const headers = { cookie: await sessionCookieFor(userId) };
  return { headers, address: await chain.fund(userId, tokens, wei) };
}

async function define(headers: Record<string, string>, recipients: unknown) {
  return call(splitRoute, "/api/skills/instant-split", {
    method: "POST",
    headers,
    body: { action: "define", name: "Royalties", recipients },
  });
}

const execute = (headers: Record<string, string>, body: Record<string, unknown>) =>
  call(splitRoute, "/api/skills/instant-split", {
    method: "POST",
    headers,
    body: { action: "execute", ...body },
  });

const transferRows = async (executionId: string) =>
  (
    await db()`select count(*)::int as n from payment_transfers where purpose like ${`split:%:${executionId}`}`
  )[0]!.n as number;

describe("split shares", () => {
  it("gives exact integer shares and the remainder to the first recipient", () => {
    expect(splitShares(100n, [3334, 3333, 3333])).toEqual([34n, 33n, 33n]);
    expect(splitShares(1_000_001n, [5000, 3000, 2000])).toEqual([500_001n, 300_000n, 200_000n]);
    expect(splitShares(2n, [2000, 5000, 3000])).toEqual([1n, 1n, 0n]);
    const big = 2n ** 200n + 7n;
    const shares = splitShares(big, [1, 9999]);
    expect(shares.reduce((a, b) => a + b, 0n)).toBe(big);
  });
});

describe("POST /api/skills/instant-split", () => {
  it("pays a three-way split with a remainder, exactly, once per execution id", async () => {
    const { headers, address } = await funded("usr_splitalice", 5_000_000n);
    const to = [newAddress(), newAddress(), newAddress()];
    const defined = await define(headers, [
      { address: to[0]!.toLowerCase(), bps: 5000 },
      { address: to[1], bps: 3000 },
      { address: to[2], bps: 2000 },
    ]);
    expect(defined.status).toBe(201);
    expect(defined.json.split.recipients[0].address).toBe(to[0]);
    const splitId = defined.json.split.id;

    const res = await execute(headers, { splitId, amount: "1000001", executionId: "june-2026" });
    expect(res.status).toBe(200);
    const { execution } = res.json;
    expect(execution).toMatchObject({
      id: "june-2026",
      status: "completed",
      amount: "1000001",
      paid: "1000001",
      remaining: "0",
      remainderRule: "first recipient",
    });
    expect(execution.legs.map((l: { amount: string }) => l.amount)).toEqual([
      "500001",
      "300000",
      "200000",
    ]);
    for (const leg of execution.legs) {
      expect(leg.status).toBe("confirmed");
      const receipt = await anvil.client.getTransactionReceipt({ hash: leg.hash });
      expect(receipt.status).toBe("success");
    }
    expect(await balance(to[0]!)).toBe(500_001n);
    expect(await balance(to[1]!)).toBe(300_000n);
    expect(await balance(to[2]!)).toBe(200_000n);
    expect(await balance(address)).toBe(5_000_000n - 1_000_001n);

    // A re-run of a completed execution sends nothing.
    const again = await execute(headers, { splitId, amount: "1000001", executionId: "june-2026" });
    expect(again.status).toBe(200);
    expect(again.json.execution.status).toBe("completed");
    expect(await transferRows("june-2026")).toBe(3);
    expect(await balance(to[0]!)).toBe(500_001n);

    const other = await execute(headers, { splitId, amount: "1000000", executionId: "june-2026" });
    expect(other.status).toBe(409);

    const one = await call(splitRoute, "/api/skills/instant-split?executionId=june-2026", {
      headers,
    });
    expect(one.json.execution.legs[0].hash).toBe(execution.legs[0].hash);
    const list = await call(splitRoute, "/api/skills/instant-split", { headers });
    expect(list.json.splits.map((s: { id: string }) => s.id)).toContain(splitId);
    expect(list.json.executions[0].id).toBe("june-2026");

    // Nobody else sees or runs it.
    const mallory = { cookie: await sessionCookieFor("usr_splitmallory") };
    const theirs = await call(splitRoute, "/api/skills/instant-split?executionId=june-2026", {
      headers: mallory,
    });
    expect(theirs.status).toBe(404);
    await ensureWallet("usr_splitmallory");
    expect((await execute(mallory, { splitId, amount: "10" })).status).toBe(404);
  });

  it("answers 400 before sending anything when the token or the gas is short", async () => {
    const { headers } = await funded("usr_splitpoor", 999n);
    const defined = await define(headers, [
      { address: newAddress(), bps: 6000 },
      { address: newAddress(), bps: 4000 },
    ]);
    const splitId = defined.json.split.id;
    const short = await execute(headers, { splitId, amount: "1000", executionId: "short" });
    expect(short.status).toBe(400);
    expect(short.json).toMatchObject({ balance: "999", required: "1000" });
    expect(short.json.error).toMatch(/Insufficient USDC/);
    expect(await transferRows("short")).toBe(0);

    const { headers: h2 } = await funded("usr_splitnogas", 1000n, 0n);
    const s2 = (
      await define(h2, [
        { address: newAddress(), bps: 6000 },
        { address: newAddress(), bps: 4000 },
      ])
    ).json.split.id;
    const noGas = await execute(h2, { splitId: s2, amount: "1000", executionId: "nogas" });
    expect(noGas.status).toBe(400);
    expect(noGas.json.error).toMatch(/for gas/);
    expect(await transferRows("nogas")).toBe(0);
    const none = await call(splitRoute, "/api/skills/instant-split?executionId=nogas", {
      headers: h2,
    });
    expect(none.status).toBe(404);
  });

  it("records exactly what a failure halfway paid, and a re-run pays only what is missing", async () => {
    const { headers, address } = await funded("usr_splithalf", 10_000n);
    const to = [newAddress(), newAddress(), newAddress()];
    const splitId = (
      await define(headers, [
        { address: to[0], bps: 3334 },
        { address: to[1], bps: 3333 },
        { address: to[2], bps: 3333 },
      ])
    ).json.split.id;
    await usdc.blacklist(to[1]!);

    const first = await execute(headers, { splitId, amount: "100", executionId: "half" });
    expect(first.status).toBe(502);
    expect(first.json.error).toMatch(/Re-run with the same executionId/);
    const recorded = first.json.execution;
    expect(recorded).toMatchObject({ status: "failed", paid: "34", remaining: "66" });
    expect(recorded.legs.map((l: { status: string }) => l.status)).toEqual([
      "confirmed",
      "failed",
      "unpaid",
    ]);
    expect(await balance(to[0]!)).toBe(34n);
    expect(await balance(to[1]!)).toBe(0n);
    expect(await balance(to[2]!)).toBe(0n);

    await usdc.unBlacklist(to[1]!);
    const rerun = await execute(headers, { splitId, amount: "100", executionId: "half" });
    expect(rerun.status).toBe(200);
    expect(rerun.json.execution).toMatchObject({ status: "completed", paid: "100" });
    expect(rerun.json.execution.legs[1].attempts).toHaveLength(2);
    expect(rerun.json.execution.legs[0].attempts).toHaveLength(1);
    expect(await balance(to[0]!)).toBe(34n);
    expect(await balance(to[1]!)).toBe(33n);
    expect(await balance(to[2]!)).toBe(33n);
    expect(await balance(address)).toBe(10_000n - 100n);
  });

  it("refuses malformed splits and amounts with 400", async () => {
    const headers = { cookie: await sessionCookieFor("usr_splitbad") };
    const a = newAddress();
    for (const recipients of [
      [{ address: a, bps: 5000 }],
      [
        { address: a, bps: 5000 },
        { address: a, bps: 5000 },
      ],
      [{ address: "0x1234", bps: 10_000 }],
      [{ address: a, bps: 10_000.5 }],
      [],
    ]) {
      const res = await define(headers, recipients);
      expect(res.status, JSON.stringify(recipients)).toBe(400);
      expect(typeof res.json.error).toBe("string");
    }
    for (const amount of ["0", "1.5", "-3", "abc", 1e21, `${2n ** 256n}`]) {
      const res = await execute(headers, { splitId: "spl_x", amount });
      expect(res.status, String(amount)).toBe(400);
    }
    expect((await execute(headers, { splitId: "spl_x", amount: "5" })).status).toBe(404);
  });

  it("is in the OpenAPI document", () => {
    const paths = openApiPaths({ "api/skills/instant-split": splitRoute });
    expect(Object.keys(paths["/api/skills/instant-split"]!).sort()).toEqual(["get", "post"]);
  });
});
