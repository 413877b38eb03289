import { describe, expect, it } from "vitest";
import { parseEnv } from "../../app/server/platform/env.server.ts";

describe("configuration", () => {
  it("has safe local defaults", () => {
    const env = parseEnv({});
    expect(env.PORT).toBe(3000);
    expect(env.HOST).toBe("127.0.0.1");
    expect(env.APP_URL).toBe("http://localhost:3000");
  });

  it("refuses production without real secrets and names each one", () => {
    expect(() => parseEnv({ NODE_ENV: "production" })).toThrow(
      "Refusing to start in production without: DATABASE_URL, SESSION_SECRET, SEALING_KEY, APP_URL",
    );
  });

  it("accepts a complete production configuration", () => {
    const env = parseEnv({
      NODE_ENV: "production",
      DATABASE_URL: "postgres://u:p@db/app",
      SESSION_SECRET: "s".repeat(32),
      SEALING_KEY: "ab".repeat(32),
      APP_URL: "https://agents.example.com",
    });
    expect(env.APP_URL).toBe("https://agents.example.com");
  });

  it("explains an invalid value", () => {
    expect(() => parseEnv({ PORT: "http" })).toThrow(/PORT/);
    expect(() => parseEnv({ SEALING_KEY: "short" })).toThrow(/SEALING_KEY must be 64 hex/);
  });

  it("refuses a partial OpenID Connect setting, naming the three variables", () => {
    const oidc = { OIDC_ISSUER: "https://idp.example", OIDC_CLIENT_ID: "platform" };
    expect(() => parseEnv(oidc)).toThrow(/OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET/);
    expect(parseEnv({ ...oidc, OIDC_CLIENT_SECRET: "s" }).OIDC_GROUPS_CLAIM).toBe("groups");
    expect(parseEnv({}).OIDC_ISSUER).toBeUndefined();
  });
});
