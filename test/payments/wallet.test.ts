import { Validator } from "@seriousme/openapi-schema-validator";
import { type Address, verifyMessage } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import * as bookingRoute from "../../app/routes/api.skills.booking-settlement.ts";
import * as splitRoute from "../../app/routes/api.skills.instant-split.ts";
import * as addressRoute from "../../app/routes/api.wallet.address.ts";
import * as createRoute from "../../app/routes/api.wallet.create.ts";
import * as hostedRoute from "../../app/routes/api.wallet.hosted.ts";
import * as walletRoute from "../../app/routes/api.wallet.ts";
import { apiDocument } from "../../app/server/api.server.ts";
import { walletSigner } from "../../app/server/payments/wallets.server.ts";
import { unseal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { call } from "../helpers/api.ts";
import { openApiPaths } from "../helpers/openapi.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import type { Anvil } from "../identity/anvil.ts";
import { type FiatToken, setNativeBalance } from "./fiat-token.ts";
import { setUpTestChain } from "./support.ts";

const chain = setUpTestChain();
let anvil: Anvil;
let usdc: FiatToken;

beforeAll(async () => {
  ({ anvil, usdc } = chain);
});

const as = async (user: string) => ({ cookie: await sessionCookieFor(user) });

describe("hosted wallets", () => {
  it("refuses callers without a credential", async () => {
    for (const [route, path, method] of [
      [walletRoute, "/api/wallet", "GET"],
      [addressRoute, "/api/wallet/address", "GET"],
      [createRoute, "/api/wallet/create", "POST"],
      [hostedRoute, "/api/wallet/hosted", "GET"],
    ] as const) {
      const res = await call(route, path, { method });
      expect(res.status, path).toBe(401);
    }
  });

  it("has no wallet until one is created; creating twice returns the same wallet", async () => {
    const headers = await as("usr_walletalice");
    expect((await call(walletRoute, "/api/wallet", { headers })).status).toBe(404);
    expect((await call(addressRoute, "/api/wallet/address", { headers })).status).toBe(404);
    const status = await call(hostedRoute, "/api/wallet/hosted", { headers });
    expect(status.json).toEqual({ hosted: false, driver: "builtin", address: null, chainId: 8453 });

    const first = await call(createRoute, "/api/wallet/create", { method: "POST", headers });
    expect(first.status).toBe(201);
    expect(first.json.created).toBe(true);
    const address = first.json.wallet.address as Address;
    expect(address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(first.json.wallet).toMatchObject({ driver: "builtin", chainId: 8453 });

    const again = await call(createRoute, "/api/wallet/create", { method: "POST", headers });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ created: false, wallet: { address } });
    const viaAction = await call(walletRoute, "/api/wallet", {
      method: "POST",
      headers,
      body: { action: "create" },
    });
    expect(viaAction.status).toBe(200);
    expect(viaAction.json.wallet.address).toBe(address);
    const viaHosted = await call(hostedRoute, "/api/wallet/hosted", { method: "POST", headers });
    expect(viaHosted.json.wallet.address).toBe(address);

    expect((await call(addressRoute, "/api/wallet/address", { headers })).json).toEqual({
      address,
      chainId: 8453,
    });
    expect((await call(hostedRoute, "/api/wallet/hosted", { headers })).json).toMatchObject({
      hosted: true,
      address,
    });
    const rows =
      await db()`select count(*)::int as n from hosted_wallets where owner_id = 'usr_walletalice'`;
    expect(rows[0]!.n).toBe(1);
  });

  it("makes one wallet under concurrent creates", async () => {
    const headers = await as("usr_walletrace");
    const answers = await Promise.all(
      [1, 2, 3, 4].map(() => call(createRoute, "/api/wallet/create", { method: "POST", headers })),
    );
    const addresses = new Set(answers.map((a) => a.json.wallet.address));
    expect(addresses.size).toBe(1);
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
  });

  it("keeps the key sealed, never returns it, and signs with it", async () => {
    const headers = await as("usr_walletbob");
    const made = await call(createRoute, "/api/wallet/create", { method: "POST", headers });
    const address = made.json.wallet.address as Address;
    const [row] =
      await db()`select sealed_key from hosted_wallets where owner_id = 'usr_walletbob'`;
    const sealed = row!.sealed_key as string;
    expect(sealed).toMatch(/^v1\./);
    const key = unseal(sealed);
    expect(key).toMatch(/^0x[0-9a-f]{64}$/);
    expect(sealed).not.toContain(key.slice(2));
    for (const res of [made, await call(walletRoute, "/api/wallet", { headers })]) {
      expect(res.text).not.toContain(key.slice(2));
      expect(res.text).not.toContain(sealed);
    }
    const signer = await walletSigner("usr_walletbob");
    expect(signer.address).toBe(address);
    const signature = await signer.signMessage({ message: "hello from the platform" });
    expect(await verifyMessage({ address, message: "hello from the platform", signature })).toBe(
      true,
    );
  });

  it("shows native and stablecoin balances as integer strings in the smallest unit", async () => {
    const headers = await as("usr_walletcarol");
    const made = await call(walletRoute, "/api/wallet", {
      method: "POST",
      headers,
      body: { action: "create" },
    });
    expect(made.status).toBe(201);
    const address = made.json.wallet.address as Address;
    await usdc.mint(address, 1_234_567n);
    await setNativeBalance(anvil, address, 10n ** 18n + 1n);
    for (const res of [
      await call(walletRoute, "/api/wallet", { headers }),
      await call(walletRoute, "/api/wallet", { method: "POST", headers, body: { action: "info" } }),
    ]) {
      expect(res.status).toBe(200);
      expect(res.json.wallet.balances).toEqual({
        native: { symbol: "ETH", decimals: 18, amount: "1000000000000000001" },
        token: { address: usdc.address, symbol: "USDC", decimals: 6, amount: "1234567" },
      });
    }
  });

  it("answers 400 for an unknown action and 502 when the chain cannot be read", async () => {
    const headers = await as("usr_walletcarol");
    const bad = await call(walletRoute, "/api/wallet", {
      method: "POST",
      headers,
      body: { action: "drain" },
    });
    expect(bad.status).toBe(400);
    expect(typeof bad.json.error).toBe("string");
    process.env.PAYMENTS_TOKEN_ADDRESS = "0x000000000000000000000000000000000000dEaD";
    resetEnvCache();
    try {
      const res = await call(walletRoute, "/api/wallet", { headers });
      expect(res.status).toBe(502);
      expect(res.json.error).toMatch(/blockchain/);
    } finally {
      process.env.PAYMENTS_TOKEN_ADDRESS = usdc.address;
      resetEnvCache();
    }
  });

  it("describes the wallet endpoints in the OpenAPI document", () => {
    const paths = openApiPaths({
      "api/wallet": walletRoute,
      "api/wallet/address": addressRoute,
      "api/wallet/create": createRoute,
      "api/wallet/hosted": hostedRoute,
    });
    expect(Object.keys(paths["/api/wallet"]!).sort()).toEqual(["get", "post"]);
    expect(Object.keys(paths["/api/wallet/hosted"]!).sort()).toEqual(["get", "post"]);
    expect(paths["/api/wallet/create"]!.post.summary).toMatch(/Create/);
    expect(paths["/api/wallet/address"]!.get).toBeDefined();
  });

  it("gives a valid OpenAPI 3.1 document for every payments route", async () => {
    const modules = {
      "api/wallet": walletRoute,
      "api/wallet/address": addressRoute,
      "api/wallet/create": createRoute,
      "api/wallet/hosted": hostedRoute,
      "api/skills/instant-split": splitRoute,
      "api/skills/booking-settlement": bookingRoute,
    };
    const doc = apiDocument({
      root: { id: "root", path: "", module: {} },
      ...Object.fromEntries(
        Object.entries(modules).map(([path, module]) => [
          path,
          { id: path, parentId: "root", path, module: module as never },
        ]),
      ),
    });
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(Object.keys(doc.paths)).toHaveLength(6);
  });
});
