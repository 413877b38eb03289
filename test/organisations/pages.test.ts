import { beforeAll, describe, expect, it } from "vitest";
import * as root from "../../app/root.tsx";
import * as agentsPage from "../../app/routes/agents._index.tsx";
import * as chatPage from "../../app/routes/agents.$id.chat.tsx";
import * as invitationPage from "../../app/routes/invitations.$token.tsx";
import * as opsUserPage from "../../app/routes/ops.users.$id.tsx";
import * as organisationsPage from "../../app/routes/organizations._index.tsx";
import * as organisationPage from "../../app/routes/organizations.$id.tsx";
import * as signupPage from "../../app/routes/signup.tsx";
import * as spaces from "../../app/routes/spaces.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// The organisation pages (decision 0203), as a browser without JavaScript uses them: make an
// organisation (the switcher moves there), add a member, the member switches to it and sees its
// agents, a viewer's chat is refused with the role's reason, a removed member's space falls
// back to their own.

const OWNER = "usr_pages_owner";
const MEMBER = "usr_pages_member";

const who = async (userId: string, space?: string) => ({
  cookie: `${await sessionCookieFor(userId)}${space ? `; __space=${space}` : ""}`,
});

beforeAll(async () => {
  process.env.AGENT_PROVISION_WAIT_MS = "0";
  resetEnvCache();
  await ensureUser(OWNER);
  await ensureUser(MEMBER);
});

describe("organisation pages", () => {
  it("make, switch to, share and leave an organisation", async () => {
    const made = await page(organisationsPage, "/organizations", await who(OWNER), {
      name: "Page Co",
    });
    expect(made.status).toBe(303);
    const org = made.location?.split("/").pop() as string;
    expect(made.setCookie).toContain(`__space=${org}`);
    const added = await page(
      organisationPage,
      `/organizations/${org}`,
      await who(OWNER),
      { intent: "add", email: `${MEMBER}@example.com`, role: "viewer" },
      { id: org },
    );
    expect(added.status).toBe(200);
    // The member switches (a stranger's switch to it is 404).
    const switched = await page(spaces, "/spaces", await who(MEMBER), {
      space: org,
      next: "/agents",
    });
    expect(switched.status).toBe(302);
    expect(switched.setCookie).toContain(`__space=${org}`);
    const header = (await page(root, "/", await who(MEMBER, org))).body as {
      spaces: { current: { id: string } | null };
    };
    expect(header.spaces.current?.id).toBe(org);
    // The organisation's agent shows in its space only.
    const agent = { id: "agt_pages_team" };
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${agent.id}, ${org}, 'Team agent', 'main', 'openai/gpt-4o-mini', 'starter')`;
    const inOrg = await page(agentsPage, "/agents", await who(MEMBER, org));
    expect(JSON.stringify(inOrg.body)).toContain(agent.id);
    const personal = await page(agentsPage, "/agents", await who(MEMBER));
    expect(JSON.stringify(personal.body)).not.toContain(agent.id);
    // A viewer may read the chat page but not chat.
    const chat = await page(
      chatPage,
      `/agents/${agent.id}/chat`,
      await who(MEMBER, org),
      { intent: "chat", message: "hi" },
      { id: agent.id },
    );
    expect(chat.status).toBe(403);
    expect(JSON.stringify(chat.body)).toContain("(viewer) may not chat");
    // Removed: the same cookie now lands in their own space.
    const removed = await page(
      organisationPage,
      `/organizations/${org}`,
      await who(OWNER),
      { intent: "remove", userId: MEMBER },
      { id: org },
    );
    expect(removed.status).toBe(200);
    const after = await page(agentsPage, "/agents", await who(MEMBER, org));
    expect(JSON.stringify(after.body)).not.toContain(agent.id);
    const stranger = await page(spaces, "/spaces", await who(MEMBER), { space: org, next: "/" });
    expect(stranger.status).toBe(404);
  });

  it("lets an operator give an organisation extra seats from /ops", async () => {
    const made = await page(organisationsPage, "/organizations", await who(OWNER), {
      name: "Seats Co",
    });
    const org = made.location?.split("/").pop() as string;
    await ensureUser("usr_pages_operator");
    await db()`update users set is_operator = true where id = 'usr_pages_operator'`;
    const set = await page(
      opsUserPage,
      `/ops/users/${org}`,
      await who("usr_pages_operator"),
      { intent: "set-seats", seats: "3" },
      { id: org },
    );
    expect(set.status).toBe(303);
    const shown = await page(
      opsUserPage,
      `/ops/users/${org}`,
      await who("usr_pages_operator"),
      undefined,
      {
        id: org,
      },
    );
    expect((shown.body as { seats: { extra: number; limit: number } }).seats).toMatchObject({
      extra: 3,
      limit: 4,
    });
    // Not an operator: refused.
    const refused = await page(
      opsUserPage,
      `/ops/users/${org}`,
      await who(OWNER),
      { intent: "set-seats", seats: "50" },
      { id: org },
    );
    expect(refused.status).not.toBe(303);
  });

  it("invite by email, and the invitee joins from the link's page with a new account", async () => {
    const made = await page(organisationsPage, "/organizations", await who(OWNER), {
      name: "Invite Co",
    });
    const org = made.location?.split("/").pop() as string;
    const email = "invited-colleague@example.com";
    const invited = await page(
      organisationPage,
      `/organizations/${org}`,
      await who(OWNER),
      { intent: "invite", email, role: "viewer" },
      { id: org },
    );
    expect(invited.status).toBe(200);
    // The link the send-email job carries (what the worker mails).
    const [job] = await db()<{ text: string }[]>`
      select data->>'text' as text from pgboss.job
      where name = 'send-email' and lower(data->>'to') = ${email}
      order by created_on desc limit 1`;
    const token = job?.text.match(/\/invitations\/([A-Za-z0-9_-]+)/)?.[1] as string;
    expect(token).toBeTruthy();
    const shown = await page(invitationPage, `/invitations/${token}`, undefined, undefined, {
      token,
    });
    expect(JSON.stringify(shown.body)).toContain("Invite Co");
    const joined = await page(signupPage, `/signup?invitation=${token}`, undefined, {
      email,
      password: "a long enough password",
      invitationToken: token,
    });
    expect(joined.status).toBe(302);
    expect(joined.location).toBe("/agents");
    expect(joined.setCookie).toContain(`__space=${org}`);
    const [member] = await db()`
      select m.role from organisation_members m join users u on u.id = m.user_id
      where m.organisation_id = ${org} and lower(u.email) = ${email}`;
    expect(member?.role).toBe("viewer");
    // Used once: the page says so.
    const again = await page(invitationPage, `/invitations/${token}`, undefined, undefined, {
      token,
    });
    expect(JSON.stringify(again.body)).toContain('"state":"accepted"');
  });
});
