import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as domainRoute from "../../app/routes/api.organizations.$id.domains.$domainId.ts";
import * as verifyRoute from "../../app/routes/api.organizations.$id.domains.$domainId.verify.ts";
import * as domainsRoute from "../../app/routes/api.organizations.$id.domains.ts";
import * as registerRoute from "../../app/routes/api.register.ts";
import { ssoConnectionSchema } from "../../app/schemas/sso.ts";
import { oauthFailureReason, signInWithOAuth } from "../../app/server/accounts/oauth.server.ts";
import { verifyCredentials } from "../../app/server/accounts/signin.server.ts";
import { createUser } from "../../app/server/accounts/users.server.ts";
import { userForWallet } from "../../app/server/identity/siwe.server.ts";
import {
  organisationForEmailDomain,
  verifyDomain,
} from "../../app/server/organisations/domains.server.ts";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { setSsoConnection } from "../../app/server/sso/connections.server.ts";
import { call } from "../helpers/api.ts";
import { type DnsServer, startDnsServer } from "../helpers/dns-server.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Verified domains and enforced single sign-on (issue 49, decision 0212): the TXT record is
// looked up through node:dns against a DNS server on loopback (DNS_RESOLVER), so the whole
// path runs; a domain one organisation holds verified cannot be verified by another; with SSO
// required, a person at the domain cannot sign in by password, the owner's break-glass can, and
// it is audited on the organisation.

let dns: DnsServer;
const OWNER = "usr_dom_owner";
const RIVAL = "usr_dom_rival";
const PASSWORD = "correct horse battery staple";

const as = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });

async function addDomain(org: string, domain: string, by = OWNER) {
  return call(domainsRoute, `/api/organizations/${org}/domains`, {
    method: "POST",
    params: { id: org },
    body: { domain },
    headers: await as(by),
  });
}

async function verify(org: string, domainId: string, by = OWNER) {
  return call(verifyRoute, `/api/organizations/${org}/domains/${domainId}/verify`, {
    method: "POST",
    params: { id: org, domainId },
    headers: await as(by),
  });
}

beforeAll(async () => {
  dns = await startDnsServer();
  process.env.DNS_RESOLVER = dns.address;
  resetEnvCache();
  for (const id of [OWNER, RIVAL]) await ensureUser(id);
});
beforeEach(() => resetRateLimiters());
afterAll(async () => {
  delete process.env.DNS_RESOLVER;
  resetEnvCache();
  await dns.close();
});

describe("verified domains", () => {
  it("verify with the TXT record, refuse a wrong token, and belong to one organisation only", async () => {
    const { organisation: acme } = await createOrganisation(OWNER, "Acme");
    const { organisation: rival } = await createOrganisation(RIVAL, "Rival");
    const added = await addDomain(acme.id, " Acme.Example. ");
    expect(added.status).toBe(201);
    expect(added.json).toMatchObject({
      domain: "acme.example",
      verified: false,
      record: { name: "_agent-platform.acme.example", type: "TXT" },
    });
    expect(added.json.record.value).toMatch(/^agent-platform-verification=[\w-]{32}$/);
    const rivalClaim = await addDomain(rival.id, "acme.example", RIVAL);
    expect(rivalClaim.status).toBe(201);

    // Nothing published yet, then a wrong token: 422, still unverified.
    const none = await verify(acme.id, added.json.id);
    expect(none.status).toBe(422);
    expect(none.json.error).toMatch(/No TXT record .* at _agent-platform\.acme\.example/);
    dns.txt.set("_agent-platform.acme.example", ["agent-platform-verification=not-the-token"]);
    const wrong = await verify(acme.id, added.json.id);
    expect(wrong.status).toBe(422);
    expect(await organisationForEmailDomain("a@acme.example")).toBeUndefined();

    // The right one (beside an unrelated record), asked over real DNS.
    dns.txt.set("_agent-platform.acme.example", ["v=spf1 -all", added.json.record.value]);
    const ok = await verify(acme.id, added.json.id);
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ verified: true, verifiedAt: expect.any(String) });
    expect(dns.asked).toContain("_agent-platform.acme.example TXT");
    expect(await organisationForEmailDomain("Someone@ACME.example")).toMatchObject({
      organisationId: acme.id,
      domain: "acme.example",
      requireSso: false,
    });
    expect(await organisationForEmailDomain("a@sub.acme.example")).toBeUndefined();

    // The rival publishes its own token too: the domain is held, 409.
    dns.txt.set("_agent-platform.acme.example", [rivalClaim.json.record.value]);
    const claimed = await verify(rival.id, rivalClaim.json.id, RIVAL);
    expect(claimed.status).toBe(409);
    expect(claimed.json.error).toBe("This domain is verified by another organisation");
    expect((await addDomain(rival.id, "acme.example", RIVAL)).status).toBe(409);

    // A resolver passed in replaces DNS (the interface the verification asks through).
    const other = await addDomain(acme.id, "other.example");
    const viaLookup = await verifyDomain(acme.id, OWNER, other.json.id, async (name) =>
      name === "_agent-platform.other.example" ? [[other.json.record.value]] : [],
    );
    expect(viaLookup.verified).toBe(true);

    const [audit] = await db()<{ n: number }[]>`select count(*)::int as n from audit_log
      where user_id = ${acme.id} and action in ('domain.added', 'domain.verified')`;
    expect(audit?.n).toBe(4);
  });

  it("are managed by owners and admins only", async () => {
    const { organisation } = await createOrganisation(OWNER, "Managed");
    await ensureUser("usr_dom_member");
    await addMember(organisation.id, OWNER, {
      email: "usr_dom_member@example.com",
      role: "viewer",
    });
    const byViewer = await addDomain(organisation.id, "viewer.example", "usr_dom_member");
    expect(byViewer.status).toBe(403);
    const byStranger = await addDomain(organisation.id, "viewer.example", RIVAL);
    expect(byStranger.status).toBe(404);
  });
});

describe("enforced single sign-on", () => {
  it("refuses a password sign-in at the domain, lets the owner break glass, and audits it", async () => {
    const owner = await createUser({ email: "boss@corp.example", password: PASSWORD });
    const staff = await createUser({ email: "staff@corp.example", password: PASSWORD });
    const { organisation } = await createOrganisation(owner.id, "Corp");
    const added = await addDomain(organisation.id, "corp.example", owner.id);
    dns.txt.set("_agent-platform.corp.example", [added.json.record.value]);
    expect((await verify(organisation.id, added.json.id, owner.id)).status).toBe(200);

    // Both sign in by password until SSO is required.
    expect((await verifyCredentials("staff@corp.example", PASSWORD)).id).toBe(staff.id);
    const requireSso = async () =>
      call(domainRoute, `/api/organizations/${organisation.id}/domains/${added.json.id}`, {
        method: "PATCH",
        params: { id: organisation.id, domainId: added.json.id },
        body: { requireSso: true },
        headers: await as(owner.id),
      });
    // Not before the organisation has a way to sign in by SSO: its people would be locked out.
    const early = await requireSso();
    expect(early.status).toBe(409);
    expect(early.json.error).toMatch(/single sign-on before requiring it/);
    await setSsoConnection(
      organisation.id,
      owner.id,
      ssoConnectionSchema.parse({
        protocol: "oidc",
        slug: "corp",
        issuer: "https://idp.corp.example",
        clientId: "corp-platform",
        clientSecret: "the-client-secret-0123456789",
      }),
    );
    const required = await requireSso();
    expect(required.status).toBe(200);
    expect(required.json.requireSso).toBe(true);

    // The staff member (and an address with no account yet) is pointed to SSO.
    await expect(verifyCredentials("staff@corp.example", PASSWORD)).rejects.toMatchObject({
      status: 403,
      message: expect.stringMatching(
        /Corp requires single sign-on for corp\.example.*Sign in with SSO/,
      ),
    });
    await expect(verifyCredentials("new@corp.example", PASSWORD)).rejects.toMatchObject({
      status: 403,
    });
    // Nor register by password (which would sign them in).
    const registered = await call(registerRoute, "/api/register", {
      method: "POST",
      body: { email: "newcomer@corp.example", password: PASSWORD },
      headers: { "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0" },
    });
    expect(registered.status).toBe(403);
    expect(registered.json.error).toMatch(/requires single sign-on/);
    // A person at another domain is not concerned.
    await createUser({ email: "guest@else.example", password: PASSWORD });
    expect((await verifyCredentials("guest@else.example", PASSWORD)).email).toBe(
      "guest@else.example",
    );

    // The owner's break-glass password sign-in works and is on the organisation's log.
    expect((await verifyCredentials("boss@corp.example", PASSWORD)).id).toBe(owner.id);
    const entries = await db()<{ actor_id: string; details: Record<string, string> }[]>`
      select actor_id, details from audit_log
      where user_id = ${organisation.id} and action = 'auth.break_glass'`;
    expect(entries).toEqual([
      {
        actor_id: owner.id,
        details: { method: "password", domain: "corp.example", email: "boss@corp.example" },
      },
    ]);
    // The owners are told by mail (the send-email job in the same transaction).
    const [mail] = await db()<{ n: number }[]>`
      select count(*)::int as n from pgboss.job
      where name = 'send-email' and data->>'to' = 'boss@corp.example'
        and data->>'subject' = 'Break-glass sign-in to Corp'`;
    expect(mail?.n).toBe(1);
    // Nor by a contract OAuth provider, nor by a linked wallet; the operator's install-wide
    // OIDC is single sign-on and goes on.
    const oauth = signInWithOAuth("oauth1", {
      providerAccountId: "google-staff",
      email: "staff@corp.example",
      emailVerified: true,
    });
    await expect(oauth).rejects.toMatchObject({ status: 403 });
    expect(oauthFailureReason(await oauth.catch((e: unknown) => e))).toBe("sso_required");
    const wallet = "0x00000000000000000000000000000000000000aa";
    await db()`insert into wallet_accounts (address, user_id, chain_id)
      values (${wallet}, ${staff.id}, 8453)`;
    await expect(userForWallet(wallet)).rejects.toMatchObject({ status: 403 });
    const viaOidc = await signInWithOAuth("oidc", {
      providerAccountId: "https://idp.corp.example#staff",
      email: "staff@corp.example",
      emailVerified: true,
    });
    expect(viaOidc.id).toBe(staff.id);
    // The refusal is audited on the staff member's own log.
    const [refused] = await db()<{ n: number }[]>`select count(*)::int as n from audit_log
      where user_id = ${staff.id} and action = 'auth.signin' and details->>'reason' = 'sso_required'`;
    expect(refused?.n).toBe(1);
  });
});
