import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseEnv } from "../../app/server/platform/env.server.ts";
import { SECRET_SETTINGS } from "../../app/server/platform/env-files.server.ts";

// Secrets given as files (Docker secrets under /run/secrets/): <NAME>_FILE instead of <NAME>.
const dir = mkdtempSync(join(tmpdir(), "env-files-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function secretFile(name: string, content: string): string {
  const file = join(dir, name);
  writeFileSync(file, content, { mode: 0o600 });
  return file;
}

const production = {
  NODE_ENV: "production",
  APP_URL: "https://agents.example.com",
};

describe("secrets from files", () => {
  it("reads a production configuration from files, trimming the trailing newline", () => {
    const env = parseEnv({
      ...production,
      DATABASE_URL_FILE: secretFile("db", "postgres://app:p%40ss@db:5432/app\n"),
      SESSION_SECRET_FILE: secretFile("session", `${"s".repeat(40)}\r\n`),
      SEALING_KEY_FILE: secretFile("sealing", `${"ab".repeat(32)}\n`),
      STRIPE_SECRET_KEY_FILE: secretFile("stripe", "sk_test_123"),
      DEFAULT_PLAN: "none",
    });
    expect(env.DATABASE_URL).toBe("postgres://app:p%40ss@db:5432/app");
    expect(env.SESSION_SECRET).toBe("s".repeat(40));
    expect(env.SEALING_KEY).toBe("ab".repeat(32));
    expect(env.STRIPE_SECRET_KEY).toBe("sk_test_123");
    expect(env).not.toHaveProperty("DATABASE_URL_FILE");
  });

  it("requires only the database password of the image's db role", () => {
    expect(() => parseEnv({ NODE_ENV: "production" }, "db")).toThrow(
      "Refusing to start in production without: POSTGRES_PASSWORD",
    );
    const env = parseEnv(
      { NODE_ENV: "production", POSTGRES_PASSWORD_FILE: secretFile("pg", "pw-from-secret\n") },
      "db",
    );
    expect(env.POSTGRES_PASSWORD).toBe("pw-from-secret");
  });

  it("validates a value from a file like one given directly", () => {
    expect(() => parseEnv({ SEALING_KEY_FILE: secretFile("short", "abc\n") })).toThrow(
      /SEALING_KEY must be 64 hex/,
    );
  });

  it("refuses a setting given both ways", () => {
    expect(() =>
      parseEnv({
        SESSION_SECRET: "s".repeat(32),
        SESSION_SECRET_FILE: secretFile("both", "t".repeat(32)),
      }),
    ).toThrow("SESSION_SECRET and SESSION_SECRET_FILE are both set; keep one");
  });

  it("names the variable and path of an unreadable file, never a secret", () => {
    const missing = join(dir, "missing");
    expect(() => parseEnv({ OPENAI_API_KEY_FILE: missing })).toThrow(
      `OPENAI_API_KEY_FILE: cannot read ${missing} (ENOENT)`,
    );
    expect(() => parseEnv({ OPENAI_API_KEY_FILE: dir })).toThrow(
      `OPENAI_API_KEY_FILE: cannot read ${dir} (EISDIR)`,
    );
    // The error lists every problem, and prints no content of the files it did read.
    const attempt = () =>
      parseEnv({
        ANTHROPIC_API_KEY_FILE: secretFile("anthropic", "sk-ant-printed-nowhere"),
        SEALING_KEY_FILE: secretFile("bad-key", "sk-not-hex\n"),
        OPENROUTER_API_KEY_FILE: missing,
      });
    expect(attempt).toThrow(/OPENROUTER_API_KEY_FILE: cannot read .* \(ENOENT\)/);
    expect(attempt).not.toThrow(/sk-/);
  });

  it("refuses an empty file", () => {
    const empty = secretFile("empty", "\n");
    expect(() => parseEnv({ SMTP_URL_FILE: empty })).toThrow(`SMTP_URL_FILE: ${empty} is empty`);
  });

  it("refuses _FILE for a setting that is not a secret, and leaves other programs' alone", () => {
    expect(() => parseEnv({ PORT_FILE: secretFile("port", "80") })).toThrow(
      "PORT_FILE: PORT is not a secret; set PORT itself",
    );
    expect(parseEnv({ NODE_EXTRA_CA_CERTS_FILE: "/nowhere" }).PORT).toBe(3000);
  });

  it("covers every secret of the schema", () => {
    // Each secret read from a file arrives in the parsed configuration.
    // OIDC's secret comes with its issuer and client id (a partial setting is refused).
    const source: Record<string, string> = {
      OIDC_ISSUER: "https://idp.example",
      OIDC_CLIENT_ID: "platform",
    };
    for (const name of SECRET_SETTINGS) {
      source[`${name}_FILE`] = secretFile(
        name,
        name === "SEALING_KEY" ? "cd".repeat(32) : value(name),
      );
    }
    const env = parseEnv(source) as unknown as Record<string, unknown>;
    for (const name of SECRET_SETTINGS) {
      expect(env[name], name).toBe(name === "SEALING_KEY" ? "cd".repeat(32) : value(name));
    }
  });
});

function value(name: string): string {
  if (name === "WEBHOOK_SIGNING_SECRET") return "whsec_c2VjcmV0c2VjcmV0c2VjcmV0";
  if (name === "DATABASE_URL") return "postgres://app:pw@db/app";
  return `${name.toLowerCase()}-${"x".repeat(32)}`;
}
