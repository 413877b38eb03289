import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as eventsRoute from "../../app/routes/api.agents.$id.events.ts";
import * as agentRouteById from "../../app/routes/api.agents.$id.ts";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import * as agentsRoute from "../../app/routes/api.agents.ts";
import * as auditRoute from "../../app/routes/api.audit.ts";
import * as memberRoute from "../../app/routes/api.organizations.$id.members.$userId.ts";
import * as membersRoute from "../../app/routes/api.organizations.$id.members.ts";
import * as organisationsRoute from "../../app/routes/api.organizations.ts";
import { attachLiveSocket } from "../../app/server/agents/live-socket.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { createFakeGateway, pairedInstanceAt } from "../agents/fake-gateway.ts";
import { subscribe } from "../agents/support.ts";
import { call } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Organisations (issue 48, decision 0203): made by a person, who owns it; members added with a
// role; acting for it with X-Organization, on its agents and not on anyone else's; its audit
// log names the person who acted; its agents' live socket for members who may chat; a removed
// member's socket closes at once. The gateway is the protocol fake.

const fake = createFakeGateway();
let server: Server;
let base: string;

const OWNER = "usr_org_owner";
const MEMBER = "usr_org_member";
const VIEWER = "usr_org_viewer";
const OUTSIDER = "usr_org_outsider";

const as = async (userId: string, organisationId?: string) => ({
  cookie: await sessionCookieFor(userId),
  ...(organisationId ? { "x-organization": organisationId } : {}),
});

async function newOrganisation(name = "Acme"): Promise<string> {
  const res = await call(organisationsRoute, "/api/organizations", {
    method: "POST",
    body: { name },
    headers: await as(OWNER),
  });
  expect(res.status).toBe(201);
  const id = res.json.organisation.id as string;
  await assignPlan(id, "network", "usr_org_operator"); // unlimited seats (seats.test.ts)
  return id;
}

async function add(organisationId: string, userId: string, role: string, by = OWNER) {
  return call(membersRoute, `/api/organizations/${organisationId}/members`, {
    method: "POST",
    params: { id: organisationId },
    body: { email: `${userId}@example.com`, role },
    headers: await as(by),
  });
}

beforeAll(async () => {
  process.env.AGENT_PROVISION_WAIT_MS = "0"; // no worker: a new agent stays provisioning
  resetEnvCache();
  for (const id of [OWNER, MEMBER, VIEWER, OUTSIDER]) await ensureUser(id);
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
  closeGatewayClients();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** The agent's progress stream for a member (X-Organization); resolves its events and end. */
async function progressStream(userId: string, org: string, agentId: string) {
  const response = await eventsRoute.loader({
    request: new Request(`http://localhost/api/agents/${agentId}/events`, {
      headers: await as(userId, org),
    }),
    params: { id: agentId },
    context: { remoteAddress: "127.0.0.1" },
  });
  expect(response.status).toBe(200);
  const events: string[] = [];
  if (!response.body) throw new Error("the stream has no body");
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const ended = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      for (const m of value.matchAll(/^event: (.*)$/gm)) events.push(m[1] as string);
    }
  })();
  return { events, ended };
}

describe("organisations", () => {
  it("are made by a person, who owns them; members come with a role, under the owner rules", async () => {
    const org = await newOrganisation();
    const mine = await call(organisationsRoute, "/api/organizations", { headers: await as(OWNER) });
    expect(mine.json.organizations).toContainEqual({
      organisation: { id: org, name: "Acme", createdAt: expect.any(String) },
      role: "owner",
    });
    expect((await add(org, MEMBER, "admin")).status).toBe(201);
    expect((await add(org, MEMBER, "member")).status).toBe(409);
    expect((await add(org, "usr_nobody_at_all", "member")).status).toBe(404);
    // An admin manages members but cannot make an owner.
    const byAdmin = await add(org, VIEWER, "owner", MEMBER);
    expect(byAdmin.status).toBe(403);
    expect(byAdmin.json.error).toMatch(/Only an owner/);
    expect((await add(org, VIEWER, "viewer", MEMBER)).status).toBe(201);
    // A viewer may not manage members; a stranger does not see the organisation at all.
    expect((await add(org, OUTSIDER, "member", VIEWER)).status).toBe(403);
    const strangers = await call(membersRoute, `/api/organizations/${org}/members`, {
      params: { id: org },
      headers: await as(OUTSIDER),
    });
    expect(strangers.status).toBe(404);
    // The last owner stays an owner.
    const demote = await call(memberRoute, `/api/organizations/${org}/members/${OWNER}`, {
      method: "PATCH",
      params: { id: org, userId: OWNER },
      body: { role: "admin" },
      headers: await as(OWNER),
    });
    expect(demote.status).toBe(409);
    const members = await call(membersRoute, `/api/organizations/${org}/members`, {
      params: { id: org },
      headers: await as(VIEWER),
    });
    expect(
      members.json.members.map((m: { userId: string; role: string }) => [m.userId, m.role]),
    ).toEqual([
      [OWNER, "owner"],
      [MEMBER, "admin"],
      [VIEWER, "viewer"],
    ]);
    // Nobody signs in as an organisation: it has no email, password or referral code.
    const [row] =
      await db()`select email, password_hash, referral_code, kind from users where id = ${org}`;
    expect(row).toEqual({
      email: null,
      password_hash: null,
      referral_code: null,
      kind: "organisation",
    });
  });

  it("owns its agents: members act on them with X-Organization, and on nobody else's", async () => {
    const org = await newOrganisation("Agents Inc");
    await add(org, MEMBER, "member");
    await add(org, VIEWER, "viewer");
    // A member may not create agents; the owner does, for the organisation.
    const refused = await call(provisionRoute, "/api/agents/provision", {
      method: "POST",
      body: { name: "Shared" },
      headers: await as(MEMBER, org),
    });
    expect(refused.status).toBe(403);
    await subscribe(org); // the organisation's own plan, as a person's
    const made = await call(provisionRoute, "/api/agents/provision", {
      method: "POST",
      body: { name: "Shared" },
      headers: await as(OWNER, org),
    });
    expect(made.status).toBe(201);
    const agentId = made.json.agent.id as string;
    // The owner's own space does not hold it, the organisation's does, for every member.
    const personal = await call(agentsRoute, "/api/agents", { headers: await as(OWNER) });
    expect(JSON.stringify(personal.json)).not.toContain(agentId);
    for (const who of [OWNER, MEMBER, VIEWER]) {
      const listed = await call(agentsRoute, "/api/agents", { headers: await as(who, org) });
      expect(listed.status).toBe(200);
      expect(JSON.stringify(listed.json)).toContain(agentId);
    }
    const elsewhere = await call(agentRouteById, `/api/agents/${agentId}`, {
      params: { id: agentId },
      headers: await as(MEMBER),
    });
    expect(elsewhere.status).toBe(404);
    // A member chats with it; a viewer may not.
    await pairedInstanceAt(org);
    const reply = await call(agentRoute, "/api/agent", {
      method: "POST",
      body: { message: "hello from a member" },
      headers: await as(MEMBER, org),
    });
    expect(reply.status).toBe(200);
    const viewerChat = await call(agentRoute, "/api/agent", {
      method: "POST",
      body: { message: "hello from a viewer" },
      headers: await as(VIEWER, org),
    });
    expect(viewerChat.status).toBe(403);
    expect(viewerChat.json.error).toMatch(/\(viewer\) does not allow this: it may not chat/);
    // The organisation's audit log names who acted; a member may not read it.
    const audit = await call(auditRoute, "/api/audit", { headers: await as(OWNER, org) });
    expect(audit.status).toBe(200);
    expect(JSON.stringify(audit.json)).toContain(MEMBER);
    expect((await call(auditRoute, "/api/audit", { headers: await as(MEMBER, org) })).status).toBe(
      403,
    );
  });

  it("lets members who may chat open its agents' live socket, and closes it when they are removed", async () => {
    const org = await newOrganisation("Live Ltd");
    await add(org, MEMBER, "member");
    await add(org, VIEWER, "viewer");
    await pairedInstanceAt(org);
    const open = (userId: string, headers: Record<string, string>) => {
      const ws = new WebSocket(`ws://${base}/agent/${org}`, { headers });
      const closed = new Promise<{ code: number; reason: string }>((resolve) =>
        ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })),
      );
      const ready = new Promise<void>((resolve) =>
        ws.on("message", (data) => {
          if (JSON.parse(String(data)).type === "ready") resolve();
        }),
      );
      return { ws, closed, ready, userId };
    };
    const viewer = open(VIEWER, { cookie: await sessionCookieFor(VIEWER) });
    expect(await viewer.closed).toEqual({ code: 4404, reason: "Agent not found" });
    const outsider = open(OUTSIDER, { cookie: await sessionCookieFor(OUTSIDER) });
    expect(await outsider.closed).toEqual({ code: 4404, reason: "Agent not found" });
    const member = open(MEMBER, { cookie: await sessionCookieFor(MEMBER) });
    await member.ready;
    const removedAt = Date.now();
    const removed = await call(memberRoute, `/api/organizations/${org}/members/${MEMBER}`, {
      method: "DELETE",
      params: { id: org, userId: MEMBER },
      headers: await as(OWNER),
    });
    expect(removed.status).toBe(200);
    expect(await member.closed).toEqual({ code: 4401, reason: "credential revoked" });
    expect(Date.now() - removedAt).toBeLessThan(1_000);
    // And over HTTP the organisation is gone for them.
    const after = await call(agentsRoute, "/api/agents", { headers: await as(MEMBER, org) });
    expect(after.status).toBe(404);
  });

  it("keeps a viewer's progress stream open (it may read), and ends it when they are removed", async () => {
    const org = await newOrganisation("Watch Co");
    await add(org, VIEWER, "viewer");
    await subscribe(org);
    const made = await call(provisionRoute, "/api/agents/provision", {
      method: "POST",
      body: { name: "Watched" },
      headers: await as(OWNER, org),
    });
    expect(made.status).toBe(201);
    const watching = await progressStream(VIEWER, org, made.json.agent.id as string);
    await expect.poll(() => watching.events[0]).toBe("progress");
    await call(memberRoute, `/api/organizations/${org}/members/${VIEWER}`, {
      method: "DELETE",
      params: { id: org, userId: VIEWER },
      headers: await as(OWNER),
    });
    await watching.ended;
    expect(watching.events.at(-1)).toBe("error");
  });
});
