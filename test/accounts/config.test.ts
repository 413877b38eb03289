import { statSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import * as keyById from "../../app/routes/api.keys.$id.ts";
import * as keys from "../../app/routes/api.keys.ts";
import * as register from "../../app/routes/api.register.ts";
import * as user from "../../app/routes/api.user.ts";
import { apiDocument } from "../../app/server/api.server.ts";
import { parseEnv, resetEnvCache } from "../../app/server/platform/env.server.ts";
import { secrets } from "../../app/server/platform/secrets.server.ts";

describe("local secrets", () => {
  it("are generated once under DATA_DIR (mode 0600) and reused", async () => {
    const file = path.join(process.env.DATA_DIR!, "secrets.json");
    await rm(file, { force: true });
    const first = secrets();
    expect(first.sessionSecret.length).toBeGreaterThanOrEqual(32);
    expect(first.sealingKey).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual(first);
    expect(secrets()).toEqual(first);
  });

  it("come from the environment when set", () => {
    process.env.SESSION_SECRET = "s".repeat(40);
    process.env.SEALING_KEY = "ab".repeat(32);
    resetEnvCache();
    try {
      expect(secrets()).toEqual({ sessionSecret: "s".repeat(40), sealingKey: "ab".repeat(32) });
    } finally {
      delete process.env.SESSION_SECRET;
      delete process.env.SEALING_KEY;
      resetEnvCache();
    }
  });
});

describe("accounts configuration", () => {
  it("parses webhook endpoints and requires a signing secret with them", () => {
    expect(parseEnv({}).WEBHOOK_ENDPOINTS).toEqual([]);
    expect(() => parseEnv({ WEBHOOK_ENDPOINTS: "https://hooks.example.com/a" })).toThrow(
      /WEBHOOK_SIGNING_SECRET/,
    );
    const env = parseEnv({
      WEBHOOK_ENDPOINTS: "https://hooks.example.com/a, https://b.example.com/x",
      WEBHOOK_SIGNING_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    });
    expect(env.WEBHOOK_ENDPOINTS).toEqual([
      "https://hooks.example.com/a",
      "https://b.example.com/x",
    ]);
    expect(() => parseEnv({ WEBHOOK_ENDPOINTS: "ftp://x" })).toThrow(/WEBHOOK_ENDPOINTS/);
  });

  it("defaults the OAuth endpoints to Google (oauth1) and GitHub (oauth2)", () => {
    const env = parseEnv({});
    expect(env.OAUTH1_AUTHORIZE_URL).toMatch(/^https:\/\/accounts\.google\.com\//);
    expect(env.OAUTH2_TOKEN_URL).toBe("https://github.com/login/oauth/access_token");
  });
});

describe("the OpenAPI document", () => {
  it("marks security per auth mode", () => {
    const doc = apiDocument({
      root: { id: "root", path: "", module: {} },
      a: { id: "a", parentId: "root", path: "api/register", module: register },
      b: { id: "b", parentId: "root", path: "api/user", module: user },
      c: { id: "c", parentId: "root", path: "api/keys", module: keys },
      d: { id: "d", parentId: "root", path: "api/keys/:id", module: keyById },
    });
    // biome-ignore lint/suspicious/noExplicitAny: reading a generated JSON document
    const paths = doc.paths as Record<string, Record<string, any>>;
    expect(paths["/api/register"]!.post.security).toEqual([]);
    expect(paths["/api/user"]!.get.security).toEqual([{ session: [] }, { apiKey: [] }]);
    expect(paths["/api/user"]!.delete.security).toEqual([{ session: [] }]);
    expect(paths["/api/keys"]!.post.security).toEqual([{ session: [] }]);
    expect(paths["/api/keys/{id}"]!.get.security).toEqual([{ session: [] }, { apiKey: [] }]);
  });
});
