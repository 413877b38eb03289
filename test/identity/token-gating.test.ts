import { type Address, getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as route from "../../app/routes/api.auth.token-gating.verify.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { call } from "../helpers/api.ts";
import { type Anvil, compile, startAnvil } from "./anvil.ts";

let anvil: Anvil;
let token: Address;
const MIN = 10n ** 18n + 7n; // 1.000000000000000007 GATE: a float would lose the 7
const token$ = compile("TestToken.sol").TestToken!;

beforeAll(async () => {
  anvil = await startAnvil();
  token = await anvil.deploy(token$);
  process.env.GATING_TOKEN_ADDRESS = token;
  process.env.GATING_MIN_BALANCE = MIN.toString();
  process.env.GATING_TOKEN_SYMBOL = "GATE";
  process.env.CHAIN_NAME = "Base";
  resetEnvCache();
});
afterAll(async () => {
  await anvil?.stop();
  delete process.env.GATING_TOKEN_ADDRESS;
  resetEnvCache();
});

const holder = (i: number) => anvil.account(i).address;
const mint = (to: Address, amount: bigint) => anvil.write(token, token$.abi, "mint", [to, amount]);

describe("POST /api/auth/token-gating/verify", () => {
  it("grants access at exactly minBalance and refuses one unit below", async () => {
    await mint(holder(1), MIN);
    await mint(holder(2), MIN - 1n);
    const at = await call(route, "/api/auth/token-gating/verify", {
      method: "POST",
      body: { fid: "123", address: holder(1).toLowerCase() },
    });
    expect(at.status).toBe(200);
    expect(at.json).toMatchObject({
      fid: "123",
      address: holder(1), // checksum-normalised
      hasAccess: true,
      tokenGated: true,
      minBalance: MIN.toString(),
      token: "GATE",
      chain: "Base",
    });
    expect(typeof at.json.message).toBe("string");
    expect(Number.isNaN(Date.parse(at.json.timestamp))).toBe(false);

    const below = await call(route, "/api/auth/token-gating/verify", {
      method: "POST",
      body: { fid: 7, address: holder(2) },
    });
    expect(below.status).toBe(200);
    expect(below.json).toMatchObject({ fid: "7", hasAccess: false, tokenGated: true });
  });

  it("answers 400 for a missing fid, a missing or malformed address", async () => {
    for (const body of [
      { address: holder(1) },
      { fid: "1" },
      { fid: "1", address: "0x1234" },
      { fid: "1", address: `0x${"g".repeat(40)}` },
      { fid: "1", address: "1".repeat(42) },
    ]) {
      const res = await call(route, "/api/auth/token-gating/verify", { method: "POST", body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(typeof res.json.error).toBe("string");
    }
  });
});

describe("GET /api/auth/token-gating/verify", () => {
  it("shows the GET fields with the token contract and the RPC origin", async () => {
    await mint(holder(3), MIN * 2n);
    const res = await call(route, `/api/auth/token-gating/verify?address=${holder(3)}`);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      address: holder(3),
      hasAccess: true,
      tokenGated: true,
      minBalance: MIN.toString(),
      token: "GATE",
      chain: "Base",
      contractAddress: getAddress(token),
      rpcEndpoint: new URL(anvil.url).origin,
    });
    const empty = await call(
      route,
      `/api/auth/token-gating/verify?address=${anvil.account(9).address}`,
    );
    expect(empty.json.hasAccess).toBe(false);
  });

  it("answers 400 without or with an invalid address", async () => {
    expect((await call(route, "/api/auth/token-gating/verify")).status).toBe(400);
    expect((await call(route, "/api/auth/token-gating/verify?address=0xabc")).status).toBe(400);
  });

  it("answers 500 {error} when the RPC cannot be reached", async () => {
    const saved = process.env.BASE_RPC_URL;
    process.env.BASE_RPC_URL = "http://127.0.0.1:9/"; // discard port: connection refused
    resetEnvCache();
    try {
      const res = await call(route, `/api/auth/token-gating/verify?address=${holder(1)}`);
      expect(res.status).toBe(500);
      expect(res.json.error).toMatch(/token balance/);
    } finally {
      process.env.BASE_RPC_URL = saved;
      resetEnvCache();
    }
  });

  it("has gating off (everyone has access) when no token is configured", async () => {
    delete process.env.GATING_TOKEN_ADDRESS;
    resetEnvCache();
    try {
      const res = await call(route, `/api/auth/token-gating/verify?address=${holder(4)}`);
      expect(res.json).toMatchObject({ hasAccess: true, tokenGated: false, contractAddress: null });
    } finally {
      process.env.GATING_TOKEN_ADDRESS = token;
      resetEnvCache();
    }
  });
});
