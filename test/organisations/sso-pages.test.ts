import { beforeAll, describe, expect, it } from "vitest";
import * as organisationPage from "../../app/routes/organizations.$id.tsx";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import { resolveScimToken } from "../../app/server/scim/tokens.server.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// The organisation page's single sign-on sections (decisions 0212, 0213), as a browser without
// JavaScript uses them: add a domain and see its TXT record, make a SCIM token (shown once, in
// the answer), save the group → role mapping; a viewer sees the domains, not the SCIM set-up.

const OWNER = "usr_ssopage_owner";
const VIEWER = "usr_ssopage_viewer";
const who = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });

interface Loaded {
  domains: { domain: string; record: { name: string; value: string }; verified: boolean }[];
  scim: { token: { preview: string } | null; groupRoles: { group: string; role: string }[] } | null;
}

beforeAll(async () => {
  await ensureUser(OWNER);
  await ensureUser(VIEWER);
});

describe("organisation page: domains and SCIM", () => {
  it("adds a domain, makes a SCIM token and saves the group mapping", async () => {
    const { organisation } = await createOrganisation(OWNER, "Sso Page Co");
    const org = organisation.id;
    await addMember(org, OWNER, { email: `${VIEWER}@example.com`, role: "viewer" });
    const post = async (form: Record<string, string>, as = OWNER) =>
      page(organisationPage, `/organizations/${org}`, await who(as), form, { id: org });

    const added = await post({ intent: "domain-add", domain: "Page.Example" });
    expect(added.status).toBe(200);
    const made = await post({ intent: "scim-token" });
    const token = (made.body as { value: { token: string } }).value.token;
    expect(await resolveScimToken(token)).toBe(org);
    const mapped = await post({
      intent: "group-roles",
      groupRoles: "Admins = admin\n\nReaders=viewer",
    });
    expect(mapped.status).toBe(200);
    const bad = await post({ intent: "group-roles", groupRoles: "Admins = owner" });
    expect(bad.status).toBe(400);

    const shown = (
      await page(organisationPage, `/organizations/${org}`, await who(OWNER), undefined, {
        id: org,
      })
    ).body as Loaded;
    expect(shown.domains).toEqual([
      expect.objectContaining({
        domain: "page.example",
        verified: false,
        record: expect.objectContaining({ name: "_agent-platform.page.example" }),
      }),
    ]);
    expect(shown.scim?.token?.preview).toMatch(/^scim_/);
    expect(JSON.stringify(shown)).not.toContain(token);
    expect(shown.scim?.groupRoles).toEqual([
      { group: "admins", role: "admin" },
      { group: "readers", role: "viewer" },
    ]);

    const asViewer = (
      await page(organisationPage, `/organizations/${org}`, await who(VIEWER), undefined, {
        id: org,
      })
    ).body as Loaded;
    expect(asViewer.domains).toHaveLength(1);
    expect(asViewer.scim).toBeNull();
    const refused = await post({ intent: "scim-token" }, VIEWER);
    expect(refused.status).toBe(403);
  });
});
