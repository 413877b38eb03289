import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import * as skillRoute from "../../app/routes/api.skills.$name.ts";
import * as skillsRoute from "../../app/routes/api.skills.ts";
import * as opsSkills from "../../app/routes/ops.skills.tsx";
import { db } from "../../app/server/platform/db.server.ts";
import { renderMarkdown } from "../../app/server/skills/catalog.server.ts";
import { approveSkill, pendingVersions } from "../../app/server/skills/publishing.server.ts";
import { agentUser, asUser } from "../agents/support.ts";
import { call } from "../helpers/api.ts";
import { getPage, postPage } from "../ops/support.ts";
import { skillMd, zipBase64, zipWithMode } from "./support.ts";

// The marketplace without a gateway: the catalog (shipped skills, search, category, sort,
// paging), publishing (form and archive, hostile archives refused with nothing stored, immutable
// versions), visibility (private, pending approval, unlisted) and the errors of install and use.

type Who = { cookie: string; id: string };
let alice: Who;
let bob: Who;

const list = (who: Who | undefined, query = "") =>
  who ? asUser(who, skillsRoute, `/api/skills${query}`) : call(skillsRoute, `/api/skills${query}`);
const post = (who: Who, body: unknown) =>
  asUser(who, skillsRoute, "/api/skills", { method: "POST", body });
const publish = (who: Who, body: Record<string, unknown>) =>
  post(who, { action: "publish", ...body });
const versionCount = async () =>
  (await db()<{ n: number }[]>`select count(*)::int as n from skill_versions`)[0]?.n ?? 0;

beforeAll(async () => {
  alice = await agentUser("solo");
  bob = await agentUser("solo");
});

describe("catalog", () => {
  it("lists the shipped skills with their shape, public to anyone", async () => {
    const res = await list(undefined, "?sort=name&limit=100");
    expect(res.status).toBe(200);
    const names = res.json.skills.map((s: { name: string }) => s.name);
    for (const shipped of [
      "daily-summary",
      "memory-notes",
      "reply-drafter",
      "task-planner",
      "unit-converter",
    ]) {
      expect(names).toContain(shipped);
    }
    expect(names).toEqual([...names].sort());
    const unit = res.json.skills.find((s: { name: string }) => s.name === "unit-converter");
    expect(unit).toEqual({
      name: "unit-converter",
      version: "1.0.0",
      description: expect.stringContaining("Convert"),
      category: "utilities",
      source: "platform",
      visibility: "public",
      publisher: { id: null, name: "Platform" },
      requirements: { bins: [], env: [], config: [], channels: [] },
      installs: 0,
      approved: true,
      createdAt: expect.any(String),
      agents: [],
    });
    expect(res.json).toMatchObject({ total: names.length, limit: 100, offset: 0 });
  });

  it("searches, filters by category and source, pages", async () => {
    const found = await list(alice, "?q=convert");
    expect(found.json.skills.map((s: { name: string }) => s.name)).toEqual(["unit-converter"]);
    const writing = await list(alice, "?category=writing");
    expect(writing.json.skills.map((s: { name: string }) => s.name)).toEqual(["reply-drafter"]);
    const page1 = await list(alice, "?source=platform&sort=name&limit=2");
    const page2 = await list(alice, "?source=platform&sort=name&limit=2&offset=2");
    expect(page1.json.skills).toHaveLength(2);
    expect(page2.json.skills[0].name > page1.json.skills[1].name).toBe(true);
    expect((await list(alice, "?sort=sideways")).status).toBe(400);
    expect((await list(alice, "?limit=0")).status).toBe(400);
  });

  it("shows one skill with its SKILL.md rendered safely; unknown → 404", async () => {
    const res = await list(alice, "?name=unit-converter");
    expect(res.status).toBe(200);
    expect(res.json.skill.skillMd).toContain("name: unit-converter");
    expect(res.json.skill.html).toContain("<h1>Unit converter</h1>");
    expect(res.json.skill.versions).toEqual([
      { version: "1.0.0", createdAt: expect.any(String), approved: true, unlisted: false },
    ]);
    expect((await list(alice, "?name=no-such-skill")).status).toBe(404);
    const html = renderMarkdown(
      "<script>alert(1)</script>\n\n[x](javascript:alert(1)) <img src=x onerror=alert(1)>",
    );
    expect(html).not.toContain("<script");
    expect(html).not.toContain("<img");
    expect(html).not.toContain("javascript:");
  });
});

describe("publishing", () => {
  it("publishes from SKILL.md text (private: listed for the publisher only, 404 for others)", async () => {
    const res = await publish(alice, {
      skillMd: skillMd("alice-private", "1.0.0"),
      visibility: "private",
    });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({
      name: "alice-private",
      version: "1.0.0",
      visibility: "private",
      status: "published",
    });
    const mine = await list(alice, "?mine=true");
    expect(mine.json.skills.map((s: { name: string }) => s.name)).toEqual(["alice-private"]);
    expect(mine.json.skills[0]).toMatchObject({ source: "user", publisher: { id: alice.id } });
    expect((await list(alice, "?name=alice-private")).status).toBe(200);
    expect((await list(bob, "?name=alice-private")).status).toBe(404);
    expect((await list(undefined, "?name=alice-private")).status).toBe(404);
    const bobs = await list(bob, "?q=alice-private");
    expect(bobs.json.skills).toEqual([]);
    // Nor can Bob install or use it.
    const install = await post(bob, {
      action: "install",
      name: "alice-private",
      agentId: "agt_none",
    });
    expect(install.status).toBe(404);
    const use = await asUser(bob, skillRoute, "/api/skills/alice-private", {
      method: "POST",
      params: { name: "alice-private" },
      body: { input: "hi" },
    });
    expect(use.status).toBe(404);
  });

  it("publishes a zip archive; a public version waits for an operator's approval", async () => {
    const archive = zipBase64([
      { path: "greeter/SKILL.md", data: Buffer.from(skillMd("greeter", "0.1.0")), mode: 0o644 },
      {
        path: "greeter/references/phrases.md",
        data: Buffer.from("# Phrases\n\nHello!"),
        mode: 0o644,
      },
      {
        path: "greeter/scripts/hello.sh",
        data: Buffer.from("#!/bin/sh\necho hello\n"),
        mode: 0o755,
      },
    ]);
    // The script is executable: refused until declared.
    const undeclared = await publish(alice, { archive, visibility: "public" });
    expect(undeclared.status).toBe(400);
    expect(undeclared.json.error).toMatch(/scripts\/hello\.sh: executable files must be declared/);

    const declared = zipBase64([
      {
        path: "greeter/SKILL.md",
        data: Buffer.from(
          skillMd(
            "greeter",
            "0.1.0",
            "Greet.",
            'metadata: { "platform": { "executables": ["scripts/hello.sh"], "category": "communication" } }\n',
          ),
        ),
        mode: 0o644,
      },
      {
        path: "greeter/scripts/hello.sh",
        data: Buffer.from("#!/bin/sh\necho hello\n"),
        mode: 0o755,
      },
    ]);
    const res = await publish(alice, { archive: declared, visibility: "public" });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({
      name: "greeter",
      version: "0.1.0",
      status: "pending-approval",
      fileCount: 2,
    });
    expect((await list(bob, "?name=greeter")).status).toBe(404);
    expect((await list(alice, "?name=greeter")).json.skill).toMatchObject({
      approved: false,
      category: "communication",
    });

    const pending = await pendingVersions();
    const entry = pending.find((p) => p.name === "greeter");
    expect(entry).toBeDefined();
    await approveSkill(entry?.id ?? "", "usr_operator");
    const seen = await list(bob, "?name=greeter");
    expect(seen.status).toBe(200);
    expect(seen.json.skill).toMatchObject({
      version: "0.1.0",
      approved: true,
      publisher: { id: alice.id },
    });
    await expect(approveSkill("skv_nope", "usr_operator")).rejects.toMatchObject({ status: 404 });
  });

  it("refuses hostile and invalid archives with the reason, storing nothing", async () => {
    const before = await versionCount();
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        {
          archive: zipBase64([
            { path: "SKILL.md", data: Buffer.from(skillMd("evil", "1.0.0")), mode: 0o644 },
            { path: "../../etc/passwd", data: Buffer.from("x"), mode: 0o644 },
          ]),
        },
        /path leaves the skill folder/,
      ],
      [
        {
          archive: zipBase64([
            { path: "SKILL.md", data: Buffer.from(skillMd("evil", "1.0.0")), mode: 0o644 },
            { path: "/abs/file", data: Buffer.from("x"), mode: 0o644 },
          ]),
        },
        /absolute paths are not allowed/,
      ],
      [{ archive: zipWithMode("link", "/etc/passwd", 0o120777) }, /symbolic links are not allowed/],
      [
        {
          archive: zipBase64([
            { path: "SKILL.md", data: Buffer.from(skillMd("evil", "1.0.0")), mode: 0o644 },
            // Random bytes do not compress: the archive itself is over the cap.
            { path: "big.bin", data: randomBytes(540 * 1024), mode: 0o644 },
          ]),
        },
        /archive larger than/,
      ],
      [
        {
          archive: zipBase64([
            { path: "SKILL.md", data: Buffer.from(skillMd("evil", "1.0.0")), mode: 0o644 },
            // Zeros compress to almost nothing: caught by the unpacked-size caps (a zip bomb).
            { path: "bomb.txt", data: Buffer.alloc(2 * 1024 * 1024), mode: 0o644 },
          ]),
        },
        /larger than 262144 bytes/,
      ],
      [
        {
          archive: zipBase64(
            Array.from({ length: 70 }, (_, i) => ({
              path: i === 0 ? "SKILL.md" : `f${i}.md`,
              data: Buffer.from(i === 0 ? skillMd("evil", "1.0.0") : "x"),
              mode: 0o644,
            })),
          ),
        },
        /more than 64 files/,
      ],
      [
        { archive: zipBase64([{ path: "README.md", data: Buffer.from("hi"), mode: 0o644 }]) },
        /SKILL\.md missing/,
      ],
      [{ archive: Buffer.from("not a zip at all").toString("base64") }, /not a zip archive/],
      [{ archive: "%%%" }, /base64/],
      [{ skillMd: "no frontmatter here" }, /must start with a --- frontmatter block/],
      [{ skillMd: skillMd("Bad Name", "1.0.0") }, /frontmatter name/],
      [{ skillMd: skillMd("okname", "1.0") }, /frontmatter version: must be a semantic version/],
      [{ skillMd: "---\nname: [unclosed\n---\nbody\n" }, /not valid YAML/],
      [{ skillMd: "---\nname: nodesc\nversion: 1.0.0\n---\nbody\n" }, /frontmatter description/],
      [{}, /archive or skillMd is required/],
    ];
    for (const [body, reason] of cases) {
      const res = await publish(alice, body);
      expect(res.status, JSON.stringify(res.json)).toBe(400);
      expect(res.json.error).toMatch(reason);
    }
    expect(await versionCount()).toBe(before);
    expect((await list(alice, "?name=evil")).status).toBe(404);
  });

  it("keeps versions immutable and names owned; a publisher can unlist a version", async () => {
    expect((await publish(alice, { skillMd: skillMd("versioned", "1.0.0") })).status).toBe(201);
    const again = await publish(alice, { skillMd: skillMd("versioned", "1.0.0", "Changed.") });
    expect(again.status).toBe(409);
    expect(again.json.error).toMatch(/already published/);
    const older = await publish(alice, { skillMd: skillMd("versioned", "0.9.0") });
    expect(older.status).toBe(409);
    const taken = await publish(bob, { skillMd: skillMd("versioned", "2.0.0") });
    expect(taken.status).toBe(409);
    expect(taken.json.error).toMatch(/belongs to another publisher/);
    const shipped = await publish(bob, { skillMd: skillMd("unit-converter", "9.0.0") });
    expect(shipped.status).toBe(409);
    expect((await publish(alice, { skillMd: skillMd("versioned", "1.1.0") })).status).toBe(201);
    expect((await list(alice, "?name=versioned")).json.skill.version).toBe("1.1.0");

    const unlisted = await post(alice, { action: "unlist", name: "versioned", version: "1.1.0" });
    expect(unlisted.json).toEqual({ name: "versioned", version: "1.1.0", unlisted: true });
    const detail = (await list(alice, "?name=versioned")).json.skill;
    expect(detail.version).toBe("1.0.0");
    expect(
      detail.versions.map((v: { version: string; unlisted: boolean }) => [v.version, v.unlisted]),
    ).toEqual([
      ["1.1.0", true],
      ["1.0.0", false],
    ]);
    expect(
      (await post(bob, { action: "unlist", name: "versioned", version: "1.0.0" })).status,
    ).toBe(404);
  });
});

describe("operator review", () => {
  it("lists pending public versions to operators only and approves one from /ops/skills", async () => {
    const res = await publish(alice, {
      skillMd: skillMd("reviewed", "2.0.0"),
      visibility: "public",
    });
    expect(res.status).toBe(201);
    expect((await getPage(opsSkills.loader, "/ops/skills", bob.cookie)).status).toBe(403);
    const refused = await postPage(
      opsSkills.action,
      "/ops/skills",
      { intent: "approve", id: res.json.versionId },
      bob.cookie,
    );
    expect(refused.status).toBe(403);
    expect((await list(bob, "?name=reviewed")).status).toBe(404);

    await db()`update users set is_operator = true where id = ${bob.id}`;
    const listed = await getPage(opsSkills.loader, "/ops/skills", bob.cookie);
    expect(listed.body).toMatchObject({
      pending: expect.arrayContaining([
        expect.objectContaining({ name: "reviewed", version: "2.0.0" }),
      ]),
    });
    const approved = await postPage(
      opsSkills.action,
      "/ops/skills",
      { intent: "approve", id: res.json.versionId },
      bob.cookie,
    );
    expect(approved.status).toBe(303);
    await db()`update users set is_operator = false where id = ${bob.id}`;
    expect((await list(bob, "?name=reviewed")).json.skill).toMatchObject({
      version: "2.0.0",
      approved: true,
    });
    const [row] = await db()<
      { approved_by: string }[]
    >`select approved_by from skill_versions where id = ${res.json.versionId}`;
    expect(row?.approved_by).toBe(bob.id);
  });
});

describe("install and use without a reachable agent", () => {
  it("answers 404 for another user's agent or an unknown skill, 400 for bad input", async () => {
    const [agent] = await db()<{ id: string }[]>`
      insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${`agt_skills${Date.now()}`}, ${alice.id}, 'A', 'main', 'openai/gpt-4o-mini', 'starter')
      returning id`;
    const agentId = agent?.id ?? "";
    expect((await post(bob, { action: "install", name: "unit-converter", agentId })).status).toBe(
      404,
    );
    expect((await post(alice, { action: "install", name: "no-such", agentId })).status).toBe(404);
    expect((await post(alice, { action: "install", name: "unit-converter" })).status).toBe(400);
    expect((await post(alice, { action: "fly" })).status).toBe(400);
    expect((await post(alice, { action: "remove", name: "unit-converter", agentId })).status).toBe(
      404,
    );
    // No instance yet: 404 naming it (a gateway that is down answers 502; skills-real.test.ts).
    const install = await post(alice, { action: "install", name: "unit-converter", agentId });
    expect(install.status).toBe(404);
    expect(install.json.error).toMatch(/No agent instance/);
    const use = (body: unknown) =>
      asUser(alice, skillRoute, "/api/skills/unit-converter", {
        method: "POST",
        params: { name: "unit-converter" },
        body,
      });
    expect((await use({})).status).toBe(400);
    expect((await use({ input: "   " })).status).toBe(400);
    expect((await use({ input: "3 km in miles" })).status).toBe(404);
  });
});
