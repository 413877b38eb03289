import {
  type Address,
  encodeFunctionData,
  type Hex,
  keccak256,
  serializeErc6492Signature,
  toHex,
} from "viem";
import { createSiweMessage } from "viem/siwe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as walletCallback from "../../app/routes/api.auth.callback.wallet.ts";
import * as nonceRoute from "../../app/routes/api.auth.wallet.nonce.ts";
import * as userRoute from "../../app/routes/api.user.ts";
import { walletEmail } from "../../app/server/identity/siwe.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { registerUser, signInUser } from "../accounts/helpers.ts";
import { call } from "../helpers/api.ts";
import { type Anvil, type Artifact, compile, startAnvil } from "./anvil.ts";

const APP = "https://app.example.test";
let anvil: Anvil;
let factory: Address;
let contracts: Record<string, Artifact>;

beforeAll(async () => {
  process.env.APP_URL = APP;
  anvil = await startAnvil();
  contracts = compile("SmartWallet.sol");
  factory = await anvil.deploy(contracts.SmartWalletFactory!);
});
afterAll(async () => {
  await anvil?.stop();
  delete process.env.APP_URL;
  resetEnvCache();
});

async function nonce(): Promise<string> {
  const res = await call(nonceRoute, "/api/auth/wallet/nonce");
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({ domain: "app.example.test", chainId: 8453 });
  return res.json.nonce;
}

async function message(address: Address, overrides: Record<string, unknown> = {}) {
  return createSiweMessage({
    address,
    chainId: 8453,
    domain: "app.example.test",
    nonce: await nonce(),
    uri: APP,
    version: "1",
    issuedAt: new Date(),
    expirationTime: new Date(Date.now() + 5 * 60_000),
    statement: "Sign in to the agent platform",
    ...overrides,
  });
}

const post = (body: unknown, headers: Record<string, string> = {}) =>
  call(walletCallback, "/api/auth/callback/wallet", { method: "POST", body, headers });

const sessionCookie = (res: { headers: Headers }) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith("__session="))
    ?.split(";")[0];

describe("wallet sign-in with an EOA", () => {
  it("creates the user once, sets the session cookie, and signs the same user in again", async () => {
    const eoa = anvil.account(1);
    const msg = await message(eoa.address);
    const res = await post({ message: msg, signature: await eoa.signMessage({ message: msg }) });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ success: true, url: "/settings" });
    expect(res.json.user.email).toBe(walletEmail(eoa.address));
    const cookie = sessionCookie(res);
    expect(cookie).toBeDefined();
    const me = await call(userRoute, "/api/user", { headers: { cookie: cookie! } });
    expect(me.status).toBe(200);
    expect(me.json.user.id).toBe(res.json.user.id);

    const msg2 = await message(eoa.address);
    const again = await post({
      message: msg2,
      signature: await eoa.signMessage({ message: msg2 }),
    });
    expect(again.status).toBe(200);
    expect(again.json.user.id).toBe(res.json.user.id);
    const [row] = await db()<{ n: number }[]>`
      select count(*)::int as n from wallet_accounts where address = ${eoa.address}`;
    expect(row?.n).toBe(1);
  });

  it("links an existing user with the wallet-derived email instead of creating one", async () => {
    const eoa = anvil.account(2);
    // Registration refuses the reserved domain now; an account holding it is a legacy one.
    const reg = await registerUser();
    expect(reg.status).toBe(201);
    await db()`update users set email = ${walletEmail(eoa.address)} where id = ${reg.json.id}`;
    const msg = await message(eoa.address);
    const res = await post({ message: msg, signature: await eoa.signMessage({ message: msg }) });
    expect(res.status).toBe(200);
    expect(res.json.user.id).toBe(reg.json.id);
    // The registrant never proved control of the wallet: their password no longer signs in.
    const signIn = await signInUser(walletEmail(eoa.address), "correct horse battery");
    expect(signIn.status).toBe(401);
  });

  it("redirects a form post to the callback URL (same-site paths only)", async () => {
    const eoa = anvil.account(3);
    const msg = await message(eoa.address);
    const signature = await eoa.signMessage({ message: msg });
    const res = await call(walletCallback, "/api/auth/callback/wallet", {
      method: "POST",
      rawBody: new URLSearchParams({ message: msg, signature, callbackUrl: "/keys" }).toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/keys");
    expect(sessionCookie(res)).toBeDefined();

    const msg2 = await message(eoa.address);
    const evil = await post({
      message: msg2,
      signature: await eoa.signMessage({ message: msg2 }),
      callbackUrl: "//evil.example/",
    });
    expect(evil.json.url).toBe("/settings");
  });
});

describe("wallet sign-in refusals (401 {error})", () => {
  it("refuses a missing message or signature", async () => {
    for (const body of [{}, { message: "x" }, { signature: "0x00" }, undefined]) {
      const res = await post(body);
      expect(res.status).toBe(401);
      expect(typeof res.json.error).toBe("string");
    }
  });

  it("refuses a wrong domain, a wrong chain, an expired or not-yet-valid message", async () => {
    const eoa = anvil.account(4);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ domain: "evil.example" }, /domain/],
      [{ chainId: 1 }, /chain/],
      [{ expirationTime: new Date(Date.now() - 1000) }, /expired/],
      [{ notBefore: new Date(Date.now() + 3600_000) }, /not yet valid/],
    ];
    for (const [overrides, error] of cases) {
      const msg = await message(eoa.address, overrides);
      const res = await post({ message: msg, signature: await eoa.signMessage({ message: msg }) });
      expect(res.status, JSON.stringify(overrides)).toBe(401);
      expect(res.json.error).toMatch(error);
    }
  });

  it("refuses a replayed nonce and a nonce the server never issued", async () => {
    const eoa = anvil.account(5);
    const msg = await message(eoa.address);
    const signature = await eoa.signMessage({ message: msg });
    expect((await post({ message: msg, signature })).status).toBe(200);
    const replay = await post({ message: msg, signature });
    expect(replay.status).toBe(401);
    expect(replay.json.error).toMatch(/nonce/);

    const forged = createSiweMessage({
      address: eoa.address,
      chainId: 8453,
      domain: "app.example.test",
      nonce: "notissuedbytheserver123",
      uri: APP,
      version: "1",
    });
    const res = await post({
      message: forged,
      signature: await eoa.signMessage({ message: forged }),
    });
    expect(res.status).toBe(401);
  });

  it("refuses a signature by another key, and leaves the nonce usable", async () => {
    const msg = await message(anvil.account(6).address);
    const bad = await post({
      message: msg,
      signature: await anvil.account(7).signMessage({ message: msg }),
    });
    expect(bad.status).toBe(401);
    expect(bad.json.error).toMatch(/Signature/);
    const good = await post({
      message: msg,
      signature: await anvil.account(6).signMessage({ message: msg }),
    });
    expect(good.status).toBe(200);
  });
});

describe("smart wallets", () => {
  const salt = (s: string) => keccak256(toHex(s));
  const predicted = (owner: Address, s: Hex) =>
    anvil.client.readContract({
      address: factory,
      abi: contracts.SmartWalletFactory!.abi,
      functionName: "getAddress",
      args: [owner, s],
    }) as Promise<Address>;

  it("signs in a not-yet-deployed wallet with an ERC-6492 signature", async () => {
    const owner = anvil.account(8);
    const s = salt("undeployed");
    const wallet = await predicted(owner.address, s);
    expect(await anvil.client.getCode({ address: wallet })).toBeUndefined();
    const msg = await message(wallet);
    const signature = serializeErc6492Signature({
      address: factory,
      data: encodeFunctionData({
        abi: contracts.SmartWalletFactory!.abi,
        functionName: "createAccount",
        args: [owner.address, s],
      }),
      signature: await owner.signMessage({ message: msg }),
    });
    const res = await post({ message: msg, signature });
    expect(res.status, res.text).toBe(200);
    expect(res.json.user.email).toBe(walletEmail(wallet));
    // Verification simulates the deployment; nothing was deployed.
    expect(await anvil.client.getCode({ address: wallet })).toBeUndefined();

    // The same wrapped owner signature by a stranger does not pass.
    const msg2 = await message(wallet);
    const stranger = serializeErc6492Signature({
      address: factory,
      data: encodeFunctionData({
        abi: contracts.SmartWalletFactory!.abi,
        functionName: "createAccount",
        args: [owner.address, s],
      }),
      signature: await anvil.account(9).signMessage({ message: msg2 }),
    });
    expect((await post({ message: msg2, signature: stranger })).status).toBe(401);
  });

  it("signs in a deployed ERC-1271 wallet", async () => {
    const owner = anvil.account(8);
    const s = salt("deployed");
    const wallet = await predicted(owner.address, s);
    await anvil.write(factory, contracts.SmartWalletFactory!.abi, "createAccount", [
      owner.address,
      s,
    ]);
    expect(await anvil.client.getCode({ address: wallet })).toBeDefined();
    const msg = await message(wallet);
    const res = await post({ message: msg, signature: await owner.signMessage({ message: msg }) });
    expect(res.status, res.text).toBe(200);
    expect(res.json.user.email).toBe(walletEmail(wallet));
  });

  it("answers 502, not 401, when the chain is unreachable for a smart-wallet signature", async () => {
    const owner = anvil.account(8);
    const wallet = await predicted(owner.address, salt("outage"));
    const msg = await message(wallet);
    const signature = await owner.signMessage({ message: msg });
    const saved = process.env.BASE_RPC_URL;
    process.env.BASE_RPC_URL = "http://127.0.0.1:9/";
    resetEnvCache();
    try {
      const res = await post({ message: msg, signature });
      expect(res.status).toBe(502);
    } finally {
      process.env.BASE_RPC_URL = saved;
      resetEnvCache();
    }
  });
});

describe("nonces", () => {
  it("are unpredictable: no two of 200 in a row share 8 characters, and all fit EIP-4361", async () => {
    const nonces: string[] = [];
    for (let i = 0; i < 200; i++) {
      // Spread over client IPs so the per-IP limit does not end the run.
      const res = await call(nonceRoute, "/api/auth/wallet/nonce", {
        remoteAddress: `203.0.113.${Math.floor(i / 50) + 1}`,
      });
      expect(res.status).toBe(200);
      nonces.push(res.json.nonce);
    }
    for (const n of nonces) expect(n).toMatch(/^[A-Za-z0-9]{8,}$/);
    // Every 8-character window of every nonce, and which nonce it came from.
    const seen = new Map<string, number>();
    const shared: string[] = [];
    nonces.forEach((n, i) => {
      for (let k = 0; k + 8 <= n.length; k++) {
        const window = n.slice(k, k + 8);
        const first = seen.get(window);
        if (first === undefined) seen.set(window, i);
        else if (first !== i) shared.push(`${window}: nonces ${first} and ${i}`);
      }
    });
    expect(shared).toEqual([]);
  });

  it("are rate limited per client IP (60 a minute)", async () => {
    const from = (ip: string) => call(nonceRoute, "/api/auth/wallet/nonce", { remoteAddress: ip });
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await from("198.51.100.7")).status);
    expect(statuses.slice(0, 60).every((s) => s === 200)).toBe(true);
    expect(statuses[60]).toBe(429);
    expect((await from("198.51.100.8")).status).toBe(200);
  });
});
