import { createLocalJWKSet, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { groupsOf } from "../../app/server/accounts/oidc.server.ts";
import {
  type IdTokenExpectations,
  verifyIdToken,
} from "../../app/server/accounts/oidc-id-token.server.ts";

// The ID token's checks on their own, with tokens signed by a key of this file's (the flow
// against a real provider is test/accounts/oidc.test.ts).
const ISSUER = "https://idp.example";
const CLIENT = "platform";
let expected: IdTokenExpectations;
let sign: (claims: JWTPayload) => Promise<string>;

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" };
  expected = {
    issuer: ISSUER,
    clientId: CLIENT,
    nonce: "n-1",
    keys: createLocalJWKSet({ keys: [jwk] }),
  };
  sign = (claims) =>
    new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: "k1" }).sign(privateKey);
});

const now = () => Math.floor(Date.now() / 1000);
const good = (): JWTPayload => ({
  iss: ISSUER,
  aud: CLIENT,
  sub: "s-1",
  nonce: "n-1",
  iat: now(),
  exp: now() + 300,
  email: "a@example.com",
});

describe("verifyIdToken", () => {
  it("returns the claims of a good token", async () => {
    const claims = await verifyIdToken(await sign(good()), expected);
    expect(claims).toMatchObject({ sub: "s-1", email: "a@example.com" });
  });

  it.each<[string, (c: JWTPayload) => JWTPayload, RegExp]>([
    ["several audiences without azp", (c) => ({ ...c, aud: [CLIENT, "other"] }), /azp/],
    ["azp naming another client", (c) => ({ ...c, azp: "other" }), /azp/],
    ["no iat", ({ iat: _, ...c }) => c, /iat/],
    ["no nonce", ({ nonce: _, ...c }) => c, /nonce/],
    ["an old iat (not this sign-in's)", (c) => ({ ...c, iat: now() - 3600 }), /expired \(iat\)/],
    ["expired beyond a minute of skew", (c) => ({ ...c, exp: now() - 61 }), /expired \(exp\)/],
  ])("refuses %s", async (_what, change, message) => {
    await expect(verifyIdToken(await sign(change(good())), expected)).rejects.toThrow(message);
  });

  it("accepts several audiences when azp is this client, and exp within the skew", async () => {
    const token = await sign({ ...good(), aud: [CLIENT, "other"], azp: CLIENT, exp: now() - 30 });
    await expect(verifyIdToken(token, expected)).resolves.toMatchObject({ sub: "s-1" });
  });
});

describe("groupsOf", () => {
  it("keeps strings, takes one string as one group, and says null when there is no claim", () => {
    expect(groupsOf(["a", 1, "", "b"])).toEqual(["a", "b"]);
    expect(groupsOf("admins")).toEqual(["admins"]);
    expect(groupsOf(undefined)).toBeNull();
    expect(groupsOf(Array.from({ length: 300 }, (_, i) => `g${i}`))).toHaveLength(256);
  });
});
