import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import {
  allows,
  isPermission,
  ROLES,
  type Role,
} from "../../app/server/organisations/roles.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import {
  type AnyEndpoint,
  API_ROUTE,
  type ApiRoute,
} from "../../app/server/platform/http.server.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// The role matrix (issue 48, decision 0203): every endpoint of every /api route module, called
// for an organisation (X-Organization) by a member of each role, by session cookie and by API
// key. An endpoint that declares no permission acts for a person only and refuses every role;
// one that declares a permission lets exactly the roles the table gives it past authorisation
// (what the handler then answers, a 400 for the empty body or a 404 for a made-up id, is not
// this test's); a non-member gets 404 for the organisation itself.

const routesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../app/routes");

interface Case {
  file: string;
  method: string;
  spec: AnyEndpoint;
  module: RouteModule;
  params: Record<string, string>;
}

const PERSON_ONLY = /acts for a person, not an organisation/;
const ROLE_REFUSED = /Your role in this organisation \((\w+)\) does not allow this/;

let organisationId: string;
const people = Object.fromEntries(ROLES.map((role) => [role, `usr_matrix_${role}`])) as Record<
  Role,
  string
>;
const stranger = "usr_matrix_stranger";
const cases: Case[] = [];

async function endpoints(): Promise<Case[]> {
  const found: Case[] = [];
  for (const file of readdirSync(routesDir)
    .filter((f) => /^api\..*\.tsx?$/.test(f))
    .sort()) {
    const module = (await import(path.join(routesDir, file))) as RouteModule;
    const route = (module.loader as unknown as { [API_ROUTE]?: ApiRoute } | undefined)?.[API_ROUTE];
    if (!route) continue;
    // Every `$name` segment gets a made-up value; `$userId` the organisation (the owner's id in
    // the path, as a member sends it), so an allowed call reaches its handler.
    const names = [...file.matchAll(/\$(\w+)/g)].map((m) => m[1] as string);
    for (const [method, spec] of Object.entries(route) as Array<[string, AnyEndpoint]>) {
      if (spec.auth === "none") continue;
      const params = Object.fromEntries(
        names.map((n) => [n, n === "userId" ? "ORG" : `x_${n}_unknown`]),
      );
      found.push({ file, method, spec, module, params });
    }
  }
  return found;
}

async function callAs(c: Case, who: string, via: "cookie" | "key") {
  const headers: Record<string, string> = { "x-organization": organisationId };
  if (via === "cookie") headers.cookie = await sessionCookieFor(who);
  else headers.authorization = `Bearer ${(await createApiKey(who, "matrix")).key}`;
  const params = Object.fromEntries(
    Object.entries(c.params).map(([k, v]) => [k, v === "ORG" ? organisationId : v]),
  );
  return call(c.module, `/${c.file}`, {
    method: c.method,
    params,
    headers,
    ...(c.method === "GET" || c.method === "DELETE" ? {} : { body: {} }),
  });
}

describe("organisation roles on every API route", () => {
  beforeAll(async () => {
    for (const id of [...Object.values(people), stranger]) await ensureUser(id);
    ({
      organisation: { id: organisationId },
    } = await createOrganisation(people.owner, "Matrix"));
    await assignPlan(organisationId, "network", "usr_matrix_operator"); // seats for every role
    for (const role of ROLES.filter((r) => r !== "owner")) {
      await addMember(organisationId, people.owner, { email: `${people[role]}@example.com`, role });
    }
    cases.push(...(await endpoints()));
  }, 60_000);

  it("declares only known permissions, and some endpoints act for organisations", () => {
    expect(cases.length).toBeGreaterThan(80);
    const declared = cases.filter((c) => c.spec.permission !== undefined);
    expect(declared.length).toBeGreaterThan(40);
    for (const c of declared) expect(isPermission(c.spec.permission as string)).toBe(true);
  });

  it("lets exactly the table's roles past authorisation, by cookie and by API key", async () => {
    const wrong: string[] = [];
    for (const c of cases) {
      for (const role of ROLES) {
        for (const via of ["cookie", "key"] as const) {
          const res = await callAs(c, people[role], via);
          const error = String(res.json?.error ?? "");
          const label = `${c.method} ${c.file} as ${role} by ${via}: ${res.status} ${error}`;
          // An API key cannot call a session-only endpoint at all (before any organisation).
          if (via === "key" && c.spec.auth === "session") {
            if (res.status !== 403) wrong.push(label);
            continue;
          }
          const permission = c.spec.permission;
          if (permission === undefined) {
            if (res.status !== 403 || !PERSON_ONLY.test(error)) wrong.push(label);
          } else if (!isPermission(permission) || !allows(role, permission)) {
            if (res.status !== 403 || ROLE_REFUSED.exec(error)?.[1] !== role) wrong.push(label);
          } else if (PERSON_ONLY.test(error) || ROLE_REFUSED.test(error) || res.status === 401) {
            wrong.push(label);
          }
        }
      }
    }
    expect(wrong).toEqual([]);
  }, 240_000);

  it("answers 404 for an organisation the caller is not a member of", async () => {
    const wrong: string[] = [];
    for (const c of cases.filter((x) => x.spec.auth !== "session")) {
      const res = await callAs(c, stranger, "cookie");
      if (res.status !== 404 || res.json?.error !== "Organisation not found") {
        wrong.push(`${c.method} ${c.file}: ${res.status} ${res.json?.error}`);
      }
    }
    expect(wrong).toEqual([]);
  }, 120_000);

  it("leaves no trace of the matrix's calls in the organisation's agents", async () => {
    const [row] = await db()<{ n: number }[]>`
      select count(*)::int as n from agents where user_id = ${organisationId}`;
    expect(row?.n).toBe(0);
  });
});
