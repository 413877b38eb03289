import { readdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { createSession } from "../../app/server/accounts/sessions.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { newUser } from "../accounts/helpers.ts";
import { type CallOptions, call, type RouteModule } from "../helpers/api.ts";

// Every route of GET /api/openapi.json gets hostile input, signed out, with a session cookie and
// with an API key: no answer may be a 500, and every 4xx is JSON {error}. None of these bodies
// is valid, so routes that would start gateway work refuse them before doing any.

// The limiter still runs, but never refuses: a 429 would hide what the route does with the body.
process.env.RATE_LIMIT_SCALE = "100000";
resetEnvCache();

const routesDir = new URL("../../app/routes/", import.meta.url);
const files: Record<string, RouteModule> = {};
for (const name of readdirSync(routesDir).filter((n) => /^api\..*\.ts$/.test(n))) {
  files[name] = (await import(new URL(name, routesDir).href)) as RouteModule;
}

/** Remix flat-route file name → route path (`api.agents.$id.ts` → `api/agents/:id`). */
function remixPath(file: string): string {
  const name = file.replace(/\.ts$/, "");
  return name
    .split(/\.(?![^[]*\])/)
    .map((part) => (part === "$" ? "*" : part.replace(/^\$/, ":").replace(/\[(.*?)\]/g, "$1")))
    .join("/");
}

const modules = new Map<string, RouteModule>(
  Object.entries(files).map(([file, mod]) => [`/${remixPath(file)}`, mod]),
);
const build = {
  routes: {
    root: { id: "root", path: "", module: {} },
    ...Object.fromEntries(
      [...modules].map(([path, module]) => [
        path,
        { id: path, parentId: "root", path: path.slice(1), module },
      ]),
    ),
  },
};

// biome-ignore lint/suspicious/noExplicitAny: reading a generated JSON document
type Operation = any;
type Who = { name: string; headers: Record<string, string> };

const deepArray = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
const deepObject = `${'{"a":'.repeat(20_000)}1${"}".repeat(20_000)}`;

/** The hostile bodies for an operation: raw text and a content type (none: no body at all). */
function hostileBodies(op: Operation): { label: string; raw?: string; type?: string }[] {
  const schema = op.requestBody?.content?.["application/json"]?.schema ?? {};
  const props = Object.keys(schema.properties ?? { value: {} });
  const each = (value: unknown) => JSON.stringify(Object.fromEntries(props.map((p) => [p, value])));
  const huge = "\u00e9".repeat(Math.floor(400_000 / props.length));
  return [
    { label: "no body" },
    { label: "empty body", raw: "", type: "application/json" },
    { label: "invalid JSON", raw: '{"a": ', type: "application/json" },
    { label: "not JSON at all", raw: "\u0000\uffff<xml/>", type: "text/plain" },
    { label: "deeply nested array", raw: deepArray, type: "application/json" },
    { label: "deeply nested object", raw: deepObject, type: "application/json" },
    { label: "over the size limit", raw: `"${"a".repeat(1_100_000)}"`, type: "application/json" },
    { label: "huge strings", raw: each(huge), type: "application/json" },
    { label: "wrong types (numbers)", raw: each(-1e308), type: "application/json" },
    { label: "wrong types (booleans)", raw: each(true), type: "application/json" },
    { label: "wrong types (null)", raw: each(null), type: "application/json" },
    { label: "arrays for objects", raw: each([{ a: 1 }]), type: "application/json" },
    { label: "an array body", raw: "[1,2,3]", type: "application/json" },
    { label: "a string body", raw: '"hello"', type: "application/json" },
    {
      label: "prototype pollution",
      raw: `{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}},${each({ __proto__: { polluted: 1 } }).slice(1)}`,
      type: "application/json",
    },
    {
      label: "form-encoded pollution",
      raw: "__proto__=1&constructor=2",
      type: "application/x-www-form-urlencoded",
    },
  ];
}

/** Hostile query strings for reads: every declared query parameter gets the same junk. */
function hostileQueries(op: Operation): string[] {
  const names = (op.parameters ?? [])
    .filter((p: { in: string }) => p.in === "query")
    .map((p: { name: string }) => p.name);
  const each = (v: string) =>
    new URLSearchParams([...names, "__proto__"].map((n: string) => [n, v])).toString();
  return ["", each("x".repeat(10_000)), each("-1"), each("[]"), each("%00")];
}

const fillPath = (path: string) => path.replace(/\{[^}]+\}/g, "nonexistent");
const modulePath = (path: string) => path.replace(/\{([^}]+)\}/g, ":$1");
const paramsOf = (path: string) =>
  Object.fromEntries([...path.matchAll(/\{([^}]+)\}/g)].map((m) => [m[1]!, "nonexistent"]));

let paths: Record<string, Record<string, Operation>> = {};
const people: Who[] = [{ name: "signed out", headers: {} }];
let userId = "";

/** A fresh session before each route: a sign-out route revokes the one it was given. */
async function freshSession() {
  const cookie = (await createSession(userId)).setCookie.split(";")[0]!;
  people[1]!.headers = { cookie, origin: "http://localhost" };
}

beforeAll(async () => {
  const openapi = modules.get("/api/openapi.json");
  if (!openapi) throw new Error("no /api/openapi.json route");
  const res = await call(openapi, "/api/openapi.json", { context: { build } as never });
  expect(res.status).toBe(200);
  paths = res.json.paths;
  const user = await newUser();
  userId = user.id;
  const key = await createApiKey(user.id, "hostile");
  people.push(
    { name: "session cookie", headers: { cookie: user.cookie, origin: "http://localhost" } },
    { name: "API key", headers: { authorization: `Bearer ${key.key}` } },
  );
});

afterAll(() => {
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
});

const failures: string[] = [];

const isAccountDeletion = (o: { path: string; method: string }) =>
  o.path === "/api/user" && o.method === "delete";

/** A 500 the contract itself names (with its own message), not a crash. */
const contract500 = new Set(["POST /api/pay/storage-upgrade"]);

/** Calls the route; records what is wrong with its answer (all are reported at once). */
async function expectRefusedCleanly(
  where: string,
  opts: CallOptions,
  path: string,
  mod: RouteModule,
  route: string,
) {
  const res = await call(mod, path, { ...opts, context: { build } as never });
  const label = `${where} → ${res.status} ${res.text.slice(0, 160)}`;
  // 502/503 are answers of their own (a provider or the worker unreachable); 500 is a bug.
  const crashed =
    res.status === 500 && (!contract500.has(route) || res.json?.error === "Internal server error");
  if (crashed) failures.push(label);
  else if (res.status >= 400) {
    const isJson = /application\/json/.test(res.headers.get("content-type") ?? "");
    if (!isJson || typeof res.json?.error !== "string") failures.push(`not JSON {error}: ${label}`);
  }
}

describe("hostile input on every OpenAPI route", () => {
  it("lists the routes it walks", () => {
    expect(Object.keys(paths).length).toBeGreaterThan(50);
    for (const path of Object.keys(paths)) {
      expect(modules.has(modulePath(path)), path).toBe(true);
    }
  });

  it("never answers 500, and every 4xx is JSON {error}", { timeout: 600_000 }, async () => {
    let calls = 0;
    // DELETE /api/user takes no body: any request deletes the account, so it goes last.
    const operations = Object.entries(paths)
      .flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })))
      .sort((a, b) => Number(isAccountDeletion(a)) - Number(isAccountDeletion(b)));
    for (const { path, method, op } of operations) {
      const mod = modules.get(modulePath(path))!;
      await freshSession();
      const verb = method.toUpperCase();
      for (const who of people) {
        const base: CallOptions = {
          method: verb,
          params: paramsOf(path),
          headers: who.headers,
          remoteAddress: "198.51.100.7",
        };
        if (verb === "GET" || verb === "HEAD") {
          for (const query of hostileQueries(op)) {
            const url = `${fillPath(path)}${query ? `?${query}` : ""}`;
            const where = `${who.name} ${verb} ${url.slice(0, 80)}`;
            await expectRefusedCleanly(where, base, url, mod, `${verb} ${path}`);
            calls++;
          }
          continue;
        }
        for (const body of hostileBodies(op)) {
          const headers = { ...who.headers, ...(body.type ? { "content-type": body.type } : {}) };
          await expectRefusedCleanly(
            `${who.name} ${verb} ${path} with ${body.label}`,
            { ...base, headers, ...(body.raw !== undefined ? { rawBody: body.raw } : {}) },
            fillPath(path),
            mod,
            `${verb} ${path}`,
          );
          calls++;
        }
      }
    }
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThan(500);
  });
});

describe("PUT /api/agents/:id/config with hostile bodies (issue 17)", () => {
  it("answers 400/413 {error}, not 500", async () => {
    const mod = modules.get("/api/agents/:id/config")!;
    const { cookie } = await newUser();
    const put = (raw: string | undefined) =>
      call(mod, "/api/agents/nonexistent/config", {
        method: "PUT",
        params: { id: "nonexistent" },
        headers: { cookie, origin: "http://localhost", "content-type": "application/json" },
        ...(raw === undefined ? {} : { rawBody: raw }),
      });
    const none = await put(undefined);
    expect([none.status, none.json]).toEqual([400, { error: "Request body is required" }]);
    const deep = await put(deepObject);
    expect(deep.status).toBe(400);
    expect(deep.json.error).toMatch(/nested deeper than 64 levels/);
    const huge = await put(`"${"a".repeat(1_100_000)}"`);
    expect([huge.status, huge.json]).toEqual([413, { error: "Request body exceeds 1 MiB" }]);
  });
});
