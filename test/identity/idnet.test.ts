import { syncBuiltinESMExports } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as refreshRoute from "../../app/routes/api.auth.idnet.refresh.ts";
import * as verifyRoute from "../../app/routes/api.auth.idnet.verify.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { call } from "../helpers/api.ts";
import { QUICK_AUTH_DOWN_ORIGIN, signQuickAuthToken } from "../msw/handlers/farcaster.ts";
import { type Anvil, compile, startAnvil } from "./anvil.ts";

const APP = "https://app.example.test";
const AUD = "app.example.test";
const MIN = 5_000_000n;
let anvil: Anvil;

beforeAll(async () => {
  // jose fetches the key set through node:https imported as ESM: make msw's patch visible to it.
  syncBuiltinESMExports();
  process.env.APP_URL = APP;
  anvil = await startAnvil();
  const token$ = compile("TestToken.sol").TestToken!;
  const token = await anvil.deploy(token$);
  await anvil.write(token, token$.abi, "mint", [anvil.account(1).address, MIN]);
  await anvil.write(token, token$.abi, "mint", [anvil.account(2).address, MIN - 1n]);
  process.env.GATING_TOKEN_ADDRESS = token;
  process.env.GATING_MIN_BALANCE = MIN.toString();
  process.env.GATING_TOKEN_SYMBOL = "GATE";
  resetEnvCache();
});
afterAll(async () => {
  await anvil?.stop();
  for (const k of ["APP_URL", "GATING_TOKEN_ADDRESS", "GATING_MIN_BALANCE", "GATING_TOKEN_SYMBOL"])
    delete process.env[k];
  resetEnvCache();
});

const verify = (body: unknown) =>
  call(verifyRoute, "/api/auth/idnet/verify", { method: "POST", body });
const refresh = (body: unknown) =>
  call(refreshRoute, "/api/auth/idnet/refresh", { method: "POST", body });

describe("POST /api/auth/idnet/verify", () => {
  it("accepts a valid Quick Auth token and returns a base64 session token", async () => {
    const res = await verify({ fidToken: await signQuickAuthToken({ fid: 4242, aud: AUD }) });
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({
      success: true,
      fid: "4242",
      address: "",
      tokenGated: false,
      accessLevel: "basic",
      expiresIn: 86400,
    });
    expect(typeof res.json.message).toBe("string");
    expect(res.json.sessionToken).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(res.json.sessionToken, "base64")).toHaveLength(32);
  });

  it("refuses expired, wrong-audience, wrong-issuer and wrongly signed tokens with 401", async () => {
    const cases = {
      expired: await signQuickAuthToken({ fid: 1, aud: AUD, expiresIn: -60 }),
      audience: await signQuickAuthToken({ fid: 1, aud: "evil.example" }),
      issuer: await signQuickAuthToken({ fid: 1, aud: AUD, iss: "https://evil.example" }),
      signature: await signQuickAuthToken({ fid: 1, aud: AUD, wrongKey: true }),
      garbage: "not.a.jwt",
    };
    for (const [name, fidToken] of Object.entries(cases)) {
      const res = await verify({ fidToken });
      expect(res.status, name).toBe(401);
      expect(typeof res.json.error).toBe("string");
    }
  });

  it("answers 401 without fidToken", async () => {
    expect((await verify({})).status).toBe(401);
    expect((await verify(undefined)).status).toBe(401);
  });

  it("applies token gating: 403 with required and minBalance one unit short, pass at minBalance", async () => {
    const fidToken = await signQuickAuthToken({ fid: 7, aud: AUD });
    const short = await verify({ fidToken, address: anvil.account(2).address });
    expect(short.status).toBe(403);
    expect(short.json).toMatchObject({ minBalance: MIN.toString() });
    expect(typeof short.json.error).toBe("string");
    expect(short.json.required).toBeDefined();

    const ok = await verify({ fidToken, address: anvil.account(1).address.toLowerCase() });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({
      address: anvil.account(1).address,
      tokenGated: true,
      accessLevel: "token_holder",
    });
    expect((await verify({ fidToken, address: "0x12" })).status).toBe(400);
  });

  it("answers 500 when the issuer's key set cannot be fetched", async () => {
    process.env.IDNET_ISSUER_ORIGIN = QUICK_AUTH_DOWN_ORIGIN;
    resetEnvCache();
    try {
      const fidToken = await signQuickAuthToken({ fid: 1, aud: AUD, iss: QUICK_AUTH_DOWN_ORIGIN });
      const res = await verify({ fidToken });
      expect(res.status).toBe(500);
      expect(res.json.error).toMatch(/issuer/);
    } finally {
      delete process.env.IDNET_ISSUER_ORIGIN;
      resetEnvCache();
    }
  });
});

describe("POST /api/auth/idnet/refresh", () => {
  it("rotates the session token; the old one is then refused", async () => {
    const first = await verify({ fidToken: await signQuickAuthToken({ fid: 9, aud: AUD }) });
    const res = await refresh({ refreshToken: first.json.sessionToken });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ success: true, expiresIn: 86400 });
    expect(typeof res.json.message).toBe("string");
    expect(res.json.sessionToken).not.toBe(first.json.sessionToken);
    expect((await refresh({ refreshToken: first.json.sessionToken })).status).toBe(401);
    expect((await refresh({ refreshToken: res.json.sessionToken })).status).toBe(200);
  });

  it("answers 400 when missing and 401 when unknown", async () => {
    expect((await refresh({})).status).toBe(400);
    expect((await refresh(undefined)).status).toBe(400);
    const unknown = await refresh({ refreshToken: Buffer.alloc(32, 1).toString("base64") });
    expect(unknown.status).toBe(401);
  });
});
