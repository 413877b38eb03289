import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as credentialRoute from "../../app/routes/api.webauthn.credentials.$id.ts";
import * as credentialsRoute from "../../app/routes/api.webauthn.credentials.ts";
import * as registerRoute from "../../app/routes/api.webauthn.register.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import {
  checkWebauthnProof,
  createVerificationChallenge,
} from "../../app/server/identity/verification.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { newUser, type TestUser } from "../accounts/helpers.ts";
import { subscribe } from "../agents/support.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { APP, RP_ID, softAuthenticator } from "./soft-authenticator.ts";

// Registering a security key: options → a software authenticator's attestation ("none") →
// stored; the registered key then signs a `webauthn` agent-verification proof.

let alice: TestUser;
let bob: TestUser;
const as = (user: TestUser) => ({ cookie: user.cookie, origin: APP });
const options = async (user: TestUser) =>
  (
    await call(registerRoute as unknown as RouteModule, "/api/webauthn/register", {
      headers: as(user),
    })
  ).json.options as { challenge: string; rp: { id: string }; excludeCredentials: unknown[] };
const register = (user: TestUser, response: unknown, name?: string) =>
  call(registerRoute as unknown as RouteModule, "/api/webauthn/register", {
    method: "POST",
    headers: as(user),
    body: { response, name },
  });

beforeAll(async () => {
  process.env.APP_URL = APP;
  resetEnvCache();
  alice = await newUser();
  bob = await newUser();
});
afterAll(() => {
  delete process.env.APP_URL;
  resetEnvCache();
});

describe("webauthn registration", () => {
  const key = softAuthenticator("alice");

  it("registers a key from the browser's attestation, once per challenge", async () => {
    const opts = await options(alice);
    expect(opts.rp.id).toBe(RP_ID);
    const res = await register(alice, key.attestation(opts.challenge), "YubiKey");
    expect(res.status).toBe(201);
    expect(res.json.credential).toMatchObject({ id: key.id, name: "YubiKey", transports: ["usb"] });

    // The same challenge cannot register again (single use), nor the same key twice.
    const replay = await register(alice, softAuthenticator("other").attestation(opts.challenge));
    expect(replay.status).toBe(400);
    const again = await options(alice);
    expect(again.excludeCredentials).toHaveLength(1);
    expect((await register(alice, key.attestation(again.challenge))).status).toBe(409);
  });

  it("answers 409, not 500, when one key's registrations race", async () => {
    const carol = await newUser();
    const racer = softAuthenticator("racer");
    const [a, b] = [await options(carol), await options(carol)];
    const statuses = (
      await Promise.all([
        register(carol, racer.attestation(a.challenge)),
        register(carol, racer.attestation(b.challenge)),
      ])
    ).map((r) => r.status);
    expect(statuses.sort()).toEqual([201, 409]);
  });

  it("refuses a wrong origin, an unknown challenge, another user's challenge, bad input", async () => {
    const other = softAuthenticator("wrong");
    const opts = await options(alice);
    expect(
      (await register(alice, other.attestation(opts.challenge, "https://evil.test"))).status,
    ).toBe(400);
    expect((await register(alice, other.attestation("bm90LWlzc3VlZA"))).status).toBe(400);
    const bobs = await options(bob);
    expect((await register(alice, other.attestation(bobs.challenge))).status).toBe(400);
    const malformed = await register(alice, { id: "x" });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error).toBeTruthy();
  });

  it("a registered key signs a webauthn agent-verification proof", async () => {
    await subscribe(alice.id);
    const agentId = (await createAgentRecord(alice.id, { name: "subject", model: "custom" })).id;
    const { challenge } = await createVerificationChallenge(agentId);
    const checked = await checkWebauthnProof(
      { agentId, ownerId: alice.id },
      key.assertion(challenge, 1),
    );
    expect(checked).toMatchObject({
      verificationType: "webauthn",
      metadata: { credentialId: key.id },
    });
    // Bob cannot use Alice's key.
    const bobChallenge = await createVerificationChallenge(agentId);
    await expect(
      checkWebauthnProof({ agentId, ownerId: bob.id }, key.assertion(bobChallenge.challenge, 2)),
    ).rejects.toThrow(/Unknown authenticator/);
  });

  it("lists and removes keys, only the owner's", async () => {
    const list = await call(
      credentialsRoute as unknown as RouteModule,
      "/api/webauthn/credentials",
      {
        headers: as(alice),
      },
    );
    expect(list.json.credentials.map((c: { id: string }) => c.id)).toEqual([key.id]);
    const bobList = await call(
      credentialsRoute as unknown as RouteModule,
      "/api/webauthn/credentials",
      {
        headers: as(bob),
      },
    );
    expect(bobList.json.credentials).toEqual([]);
    const path = `/api/webauthn/credentials/${key.id}`;
    const byBob = await call(credentialRoute as unknown as RouteModule, path, {
      method: "DELETE",
      params: { id: key.id },
      headers: as(bob),
    });
    expect(byBob.status).toBe(404);
    const byAlice = await call(credentialRoute as unknown as RouteModule, path, {
      method: "DELETE",
      params: { id: key.id },
      headers: as(alice),
    });
    expect(byAlice.json).toEqual({ success: true });
    const anonymous = await call(registerRoute as unknown as RouteModule, "/api/webauthn/register");
    expect(anonymous.status).toBe(401);
  });
});
