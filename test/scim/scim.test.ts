import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import * as agentsRoute from "../../app/routes/api.agents.ts";
import * as groupRolesRoute from "../../app/routes/api.organizations.$id.scim.group-roles.ts";
import * as scimSettingsRoute from "../../app/routes/api.organizations.$id.scim.ts";
import * as groupRoute from "../../app/routes/scim.v2.Groups.$id.ts";
import * as groupsRoute from "../../app/routes/scim.v2.Groups.ts";
import * as resourceTypesRoute from "../../app/routes/scim.v2.ResourceTypes.ts";
import * as schemasRoute from "../../app/routes/scim.v2.Schemas.ts";
import * as configRoute from "../../app/routes/scim.v2.ServiceProviderConfig.ts";
import * as userRoute from "../../app/routes/scim.v2.Users.$id.ts";
import * as usersRoute from "../../app/routes/scim.v2.Users.ts";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { createSession } from "../../app/server/accounts/sessions.server.ts";
import { createUser } from "../../app/server/accounts/users.server.ts";
import { attachLiveSocket } from "../../app/server/agents/live-socket.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { createOrganisation } from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { createFakeGateway, pairedInstanceAt } from "../agents/fake-gateway.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// SCIM 2.0 (issue 49, decision 0213), called as an identity provider's provisioning client
// calls it: bearer token, application/scim+json, Users created, found by filter, patched and
// deactivated, Groups whose display names map to roles. Deactivation takes access away at once:
// the person's live socket on the organisation's agent closes within a second (the backstop
// recheck is a minute here, so only the credentials channel can close it), and an account SCIM
// made stops signing anything in. The gateway is the protocol fake.

const fake = createFakeGateway();
let server: Server;
let base: string;
const OWNER = "usr_scim_owner";
let org: string;
let token: string;

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group";
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const ERROR = "urn:ietf:params:scim:api:messages:2.0:Error";

function scim(
  module: RouteModule,
  path: string,
  opts: { method?: string; body?: unknown; params?: Record<string, string>; bearer?: string } = {},
) {
  return call(module, `/scim/v2${path}`, {
    method: opts.method ?? "GET",
    ...(opts.params ? { params: opts.params } : {}),
    ...(opts.body === undefined ? {} : { rawBody: JSON.stringify(opts.body) }),
    headers: {
      authorization: `Bearer ${opts.bearer ?? token}`,
      "content-type": "application/scim+json",
      accept: "application/scim+json",
    },
  });
}

const newUser = (userName: string, extra: Record<string, unknown> = {}) =>
  scim(usersRoute, "/Users", {
    method: "POST",
    body: {
      schemas: [USER],
      userName,
      name: { givenName: "Given", familyName: "Family" },
      emails: [{ value: userName, type: "work", primary: true }],
      active: true,
      ...extra,
    },
  });

const patchUser = (id: string, Operations: unknown[]) =>
  scim(userRoute, `/Users/${id}`, {
    method: "PATCH",
    params: { id },
    body: { schemas: [PATCH], Operations },
  });

async function roleOf(userId: string): Promise<string | undefined> {
  const [row] = await db()<{ role: string }[]>`select role from organisation_members
    where organisation_id = ${org} and user_id = ${userId}`;
  return row?.role;
}

async function accountOf(scimId: string): Promise<string> {
  const [row] = await db()<
    { user_id: string }[]
  >`select user_id from scim_users where id = ${scimId}`;
  return row!.user_id;
}

function openSocket(headers: Record<string, string>) {
  const ws = new WebSocket(`ws://${base}/agent/${org}`, { headers });
  const closed = new Promise<{ code: number; reason: string; at: number }>((resolve) =>
    ws.on("close", (code, reason) => resolve({ code, reason: String(reason), at: Date.now() })),
  );
  const ready = new Promise<void>((resolve, reject) => {
    ws.on("message", (data) => {
      if (JSON.parse(String(data)).type === "ready") resolve();
    });
    ws.on("close", (code) => reject(new Error(`closed ${code} before ready`)));
  });
  return { ws, closed, ready };
}

beforeAll(async () => {
  process.env.LIVE_RECHECK_MS = "60000";
  resetEnvCache();
  await ensureUser(OWNER);
  ({
    organisation: { id: org },
  } = await createOrganisation(OWNER, "Provisioned"));
  await assignPlan(org, "network", "usr_scim_operator"); // seats for everyone
  await db()`insert into organisation_domains (id, organisation_id, domain, token, verified_at)
    values ('dom_scim_test', ${org}, 'corp.example', 'token', now())`;
  const made = await call(scimSettingsRoute, `/api/organizations/${org}/scim`, {
    method: "POST",
    params: { id: org },
    headers: { cookie: await sessionCookieFor(OWNER) },
  });
  expect(made.status).toBe(201);
  token = made.json.token;
  server = createServer((_req, res) => res.writeHead(404).end());
  attachLiveSocket(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
beforeEach(() => {
  fake.use();
  resetRateLimiters();
});
afterAll(async () => {
  delete process.env.LIVE_RECHECK_MS;
  resetEnvCache();
  closeGatewayClients();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("SCIM 2.0", () => {
  it("refuses a wrong or missing token with 401 in the SCIM error form", async () => {
    for (const bearer of ["scim_wrong", "sk_not_a_scim_token", ""]) {
      const res = await scim(usersRoute, "/Users", { bearer });
      expect(res.status).toBe(401);
      expect(res.headers.get("content-type")).toMatch(/^application\/scim\+json/);
      expect(res.json).toEqual({
        schemas: [ERROR],
        status: "401",
        detail: "A valid SCIM bearer token is required",
      });
    }
    // The settings show a preview only; rotating makes the old token stop at once.
    const settings = await call(scimSettingsRoute, `/api/organizations/${org}/scim`, {
      params: { id: org },
      headers: { cookie: await sessionCookieFor(OWNER) },
    });
    expect(settings.json.token.preview).toMatch(/^scim_.{4}….{4}$/);
    expect(JSON.stringify(settings.json)).not.toContain(token);
  });

  it("describes itself: ServiceProviderConfig, ResourceTypes, Schemas", async () => {
    const config = await scim(configRoute, "/ServiceProviderConfig");
    expect(config.status).toBe(200);
    expect(config.json).toMatchObject({
      patch: { supported: true },
      filter: { supported: true },
      bulk: { supported: false },
      authenticationSchemes: [expect.objectContaining({ type: "oauthbearertoken" })],
    });
    const types = await scim(resourceTypesRoute, "/ResourceTypes");
    expect(types.json.Resources.map((r: { id: string }) => r.id)).toEqual(["User", "Group"]);
    const schemas = await scim(schemasRoute, "/Schemas");
    expect(schemas.json.Resources.map((r: { id: string }) => r.id)).toEqual([USER, GROUP]);
  });

  it("creates, links, filters, pages and patches users as a provisioning client does", async () => {
    const alice = await newUser("alice@corp.example", { externalId: "idp-alice" });
    expect(alice.status).toBe(201);
    expect(alice.headers.get("location")).toBe(alice.json.meta.location);
    expect(alice.json).toMatchObject({
      schemas: [USER],
      userName: "alice@corp.example",
      externalId: "idp-alice",
      name: { givenName: "Given", familyName: "Family" },
      emails: [{ value: "alice@corp.example", primary: true }],
      active: true,
    });
    const aliceAccount = await accountOf(alice.json.id);
    expect(await roleOf(aliceAccount)).toBe("member");

    // An account that exists (another domain) is linked, not made.
    const bob = await createUser({ email: "bob@elsewhere.example" });
    const linked = await newUser("bob@elsewhere.example");
    expect(linked.status).toBe(201);
    expect(await accountOf(linked.json.id)).toBe(bob.id);
    // A new account at a domain the organisation has not verified: refused.
    const stray = await newUser("carol@unverified.example");
    expect(stray.status).toBe(400);
    expect(stray.json).toMatchObject({ schemas: [ERROR], status: "400", scimType: "invalidValue" });
    const again = await newUser("ALICE@corp.example");
    expect(again.status).toBe(409);
    expect(again.json.scimType).toBe("uniqueness");

    // Filtering as Okta and Entra ID look a user up before creating one.
    const found = await scim(
      usersRoute,
      `/Users?filter=${encodeURIComponent('userName eq "Alice@corp.example"')}`,
    );
    expect(found.json).toMatchObject({ totalResults: 1, startIndex: 1, itemsPerPage: 1 });
    expect(found.json.Resources[0].id).toBe(alice.json.id);
    const missing = await scim(
      usersRoute,
      `/Users?filter=${encodeURIComponent('userName eq "nobody@corp.example"')}`,
    );
    expect(missing.json).toMatchObject({ totalResults: 0, Resources: [] });
    const page = await scim(usersRoute, "/Users?startIndex=2&count=1");
    expect(page.json).toMatchObject({ totalResults: 2, startIndex: 2, itemsPerPage: 1 });
    expect(page.json.Resources[0].id).toBe(linked.json.id);
    const badFilter = await scim(usersRoute, `/Users?filter=${encodeURIComponent('name co "x"')}`);
    expect(badFilter.status).toBe(400);
    expect(badFilter.json.scimType).toBe("invalidFilter");

    // PATCH as Entra ID sends it (no path, capitalised op) and as Okta does (paths).
    const renamed = await patchUser(alice.json.id, [
      { op: "Replace", value: { "name.givenName": "Alicia", displayName: "Alicia Family" } },
      { op: "replace", path: 'emails[type eq "work"].value', value: "alicia@corp.example" },
    ]);
    expect(renamed.status).toBe(200);
    expect(renamed.json).toMatchObject({
      name: { givenName: "Alicia" },
      displayName: "Alicia Family",
      emails: [{ value: "alicia@corp.example" }],
    });
    const [row] = await db()<{ email: string; name: string }[]>`
      select email, name from users where id = ${aliceAccount}`;
    expect(row).toEqual({ email: "alicia@corp.example", name: "Alicia Family" });
    const badPath = await patchUser(alice.json.id, [
      { op: "replace", path: "nickName", value: "x" },
    ]);
    expect(badPath.status).toBe(400);
    expect(badPath.json.scimType).toBe("invalidPath");
    const unknown = await scim(userRoute, "/Users/00000000-0000-0000-0000-000000000000", {
      params: { id: "00000000-0000-0000-0000-000000000000" },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ schemas: [ERROR], status: "404" });
  });

  it("maps groups to roles, and group changes move roles at once", async () => {
    const dana = await newUser("dana@corp.example");
    const erin = await newUser("erin@corp.example");
    const danaAccount = await accountOf(dana.json.id);
    const erinAccount = await accountOf(erin.json.id);
    const mapped = await call(groupRolesRoute, `/api/organizations/${org}/scim/group-roles`, {
      method: "PUT",
      params: { id: org },
      body: {
        groupRoles: [
          { group: "Platform Admins", role: "admin" },
          { group: "Readers", role: "viewer" },
        ],
      },
      headers: { cookie: await sessionCookieFor(OWNER) },
    });
    expect(mapped.status).toBe(200);

    const admins = await scim(groupsRoute, "/Groups", {
      method: "POST",
      body: {
        schemas: [GROUP],
        displayName: "Platform Admins",
        members: [{ value: dana.json.id }],
      },
    });
    expect(admins.status).toBe(201);
    expect(admins.json.members).toEqual([expect.objectContaining({ value: dana.json.id })]);
    expect(await roleOf(danaAccount)).toBe("admin");

    const readers = await scim(groupsRoute, "/Groups", {
      method: "POST",
      body: { schemas: [GROUP], displayName: "readers" },
    });
    const addErin = await scim(groupRoute, `/Groups/${readers.json.id}`, {
      method: "PATCH",
      params: { id: readers.json.id },
      body: {
        schemas: [PATCH],
        Operations: [{ op: "add", path: "members", value: [{ value: erin.json.id }] }],
      },
    });
    expect(addErin.status).toBe(200);
    expect(await roleOf(erinAccount)).toBe("viewer");
    // In both groups: the higher role.
    await scim(groupRoute, `/Groups/${readers.json.id}`, {
      method: "PATCH",
      params: { id: readers.json.id },
      body: {
        schemas: [PATCH],
        Operations: [{ op: "add", path: "members", value: [{ value: dana.json.id }] }],
      },
    });
    expect(await roleOf(danaAccount)).toBe("admin");
    // Out of the admins: a reader.
    const removed = await scim(groupRoute, `/Groups/${admins.json.id}`, {
      method: "PATCH",
      params: { id: admins.json.id },
      body: {
        schemas: [PATCH],
        Operations: [{ op: "remove", path: `members[value eq "${dana.json.id}"]` }],
      },
    });
    expect(removed.json.members).toEqual([]);
    expect(await roleOf(danaAccount)).toBe("viewer");

    const byName = await scim(
      groupsRoute,
      `/Groups?filter=${encodeURIComponent('displayName eq "Readers"')}`,
    );
    expect(byName.json.totalResults).toBe(1);
    const user = await scim(userRoute, `/Users/${dana.json.id}`, { params: { id: dana.json.id } });
    expect(user.json.groups).toEqual([expect.objectContaining({ display: "readers" })]);

    // The group goes: its members fall back to the default role.
    const gone = await scim(groupRoute, `/Groups/${readers.json.id}`, {
      method: "DELETE",
      params: { id: readers.json.id },
    });
    expect(gone.status).toBe(204);
    expect(await roleOf(danaAccount)).toBe("member");
    expect(await roleOf(erinAccount)).toBe("member");
  });

  it("deactivation closes the person's live socket within a second and revokes their credentials", async () => {
    await pairedInstanceAt(org);
    const frank = await newUser("frank@corp.example");
    const frankAccount = await accountOf(frank.json.id);
    const session = await createSession(frankAccount);
    const cookie = session.setCookie.split(";")[0] as string;
    const key = (await createApiKey(frankAccount, "frank's key")).key;
    const socket = openSocket({ cookie });
    await socket.ready;
    const byKey = () =>
      call(agentsRoute, "/api/agents", {
        headers: { authorization: `Bearer ${key}`, "x-organization": org },
      });
    expect((await byKey()).status).toBe(200);

    const at = Date.now();
    const off = await patchUser(frank.json.id, [{ op: "Replace", path: "active", value: "False" }]);
    expect(off.status).toBe(200);
    expect(off.json.active).toBe(false);
    const closed = await socket.closed;
    expect(closed).toMatchObject({ code: 4401, reason: "credential revoked" });
    expect(closed.at - at).toBeLessThan(1_000);
    // An account SCIM made is suspended: its key and session sign nothing in.
    expect((await byKey()).status).toBe(401);
    const bySession = await call(agentsRoute, "/api/agents", { headers: { cookie } });
    expect(bySession.status).toBe(401);
    expect(await roleOf(frankAccount)).toBeUndefined();

    // Reactivated: a member again, the key works again (the revoked session does not).
    const on = await patchUser(frank.json.id, [{ op: "replace", value: { active: true } }]);
    expect(on.json.active).toBe(true);
    expect(await roleOf(frankAccount)).toBe("member");
    expect((await byKey()).status).toBe(200);
    expect((await call(agentsRoute, "/api/agents", { headers: { cookie } })).status).toBe(401);

    // DELETE: access ends the same way and the resource is gone.
    const deleted = await scim(userRoute, `/Users/${frank.json.id}`, {
      method: "DELETE",
      params: { id: frank.json.id },
    });
    expect(deleted.status).toBe(204);
    expect((await byKey()).status).toBe(401);
    const after = await scim(userRoute, `/Users/${frank.json.id}`, {
      params: { id: frank.json.id },
    });
    expect(after.status).toBe(404);
  });

  it("takes only the membership of a linked account, whose own access goes on", async () => {
    await pairedInstanceAt(org);
    const grace = await createUser({ email: "grace@own.example" });
    const made = await newUser("grace@own.example");
    expect(await roleOf(grace.id)).toBe("member");
    const cookie = await sessionCookieFor(grace.id);
    const socket = openSocket({ cookie });
    await socket.ready;
    const at = Date.now();
    await patchUser(made.json.id, [{ op: "replace", path: "active", value: false }]);
    const closed = await socket.closed;
    expect(closed).toMatchObject({ code: 4401, reason: "credential revoked" });
    expect(closed.at - at).toBeLessThan(1_000);
    // The organisation is gone for her; her own space is not.
    const inOrg = await call(agentsRoute, "/api/agents", {
      headers: { cookie, "x-organization": org },
    });
    expect(inOrg.status).toBe(404);
    expect((await call(agentsRoute, "/api/agents", { headers: { cookie } })).status).toBe(200);
  });

  it("answers malformed and hostile requests with SCIM errors, never a 500", async () => {
    const raw = (module: RouteModule, path: string, method: string, body: string, type?: string) =>
      call(module, `/scim/v2${path}`, {
        method,
        rawBody: body,
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": type ?? "application/scim+json",
        },
        ...(path.startsWith("/Users/") ? { params: { id: path.slice(7) } } : {}),
      });
    const cases = [
      await raw(usersRoute, "/Users", "POST", "{not json"),
      await raw(usersRoute, "/Users", "POST", `${"[".repeat(5000)}${"]".repeat(5000)}`),
      await raw(usersRoute, "/Users", "POST", JSON.stringify({ userName: ["x"] })),
      await raw(usersRoute, "/Users", "POST", "userName=x", "application/x-www-form-urlencoded"),
      await raw(userRoute, "/Users/not-a-uuid", "PATCH", JSON.stringify({ Operations: [] })),
      await raw(
        userRoute,
        "/Users/not-a-uuid",
        "PUT",
        JSON.stringify({ userName: "a@corp.example" }),
      ),
      await raw(
        groupsRoute,
        "/Groups",
        "POST",
        JSON.stringify({ displayName: "x", members: [{ value: "nope" }] }),
      ),
    ];
    expect(cases.map((c) => c.status)).toEqual([400, 400, 400, 415, 400, 404, 400]);
    for (const c of cases) {
      expect(c.headers.get("content-type")).toMatch(/^application\/scim\+json/);
      expect(c.json).toMatchObject({ schemas: [ERROR], status: String(c.status) });
    }
    const wrongMethod = await call(configRoute, "/scim/v2/ServiceProviderConfig", {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    expect(wrongMethod.status).toBe(405);
  });

  it("never deactivates an owner", async () => {
    const owner = await createUser({ email: "owner2@corp.example" });
    await db()`insert into organisation_members (organisation_id, user_id, role)
      values (${org}, ${owner.id}, 'owner')`;
    const made = await newUser("owner2@corp.example");
    const off = await patchUser(made.json.id, [{ op: "replace", path: "active", value: false }]);
    expect(off.status).toBe(409);
    expect(off.json).toMatchObject({ schemas: [ERROR], status: "409", scimType: "mutability" });
    expect(await roleOf(owner.id)).toBe("owner");
  });
});
