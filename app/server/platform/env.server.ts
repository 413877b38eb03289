import { z } from "zod";

// One schema for the whole environment, read once. Local runs get safe defaults; production
// refuses to start without real secrets and names every missing one.
const schema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  HOST: z.string().default("127.0.0.1"),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  APP_URL: z.url().optional(),
  DATABASE_URL: z.string().optional(),
  DATA_DIR: z.string().default(".data"),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(100).default(10),
  SESSION_SECRET: z.string().min(32).optional(),
  SEALING_KEY: z
    .string()
    .regex(/^[0-9a-f]{64}$/i, "SEALING_KEY must be 64 hex characters (32 bytes)")
    .optional(),
  SMTP_URL: z.string().optional(),
  MAIL_FROM: z.string().default("Agent Platform <no-reply@localhost>"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  TRUSTED_PROXIES: z.string().default(""),
  // OAuth provider oauth1 (Google) and oauth2 (GitHub). A provider without a client id and
  // secret is off: its sign-in answers 503. The endpoint URLs exist so tests (msw) and
  // self-hosted identity providers can point elsewhere.
  OAUTH1_CLIENT_ID: z.string().optional(),
  OAUTH1_CLIENT_SECRET: z.string().optional(),
  OAUTH1_AUTHORIZE_URL: z.url().default("https://accounts.google.com/o/oauth2/v2/auth"),
  OAUTH1_TOKEN_URL: z.url().default("https://oauth2.googleapis.com/token"),
  OAUTH1_USERINFO_URL: z.url().default("https://openidconnect.googleapis.com/v1/userinfo"),
  OAUTH2_CLIENT_ID: z.string().optional(),
  OAUTH2_CLIENT_SECRET: z.string().optional(),
  OAUTH2_AUTHORIZE_URL: z.url().default("https://github.com/login/oauth/authorize"),
  OAUTH2_TOKEN_URL: z.url().default("https://github.com/login/oauth/access_token"),
  OAUTH2_API_URL: z.url().default("https://api.github.com"),
  // Outgoing events (user.created, …): comma-separated endpoint URLs and the Standard Webhooks
  // signing secret (whsec_<base64>). Endpoints without a secret refuse to start.
  WEBHOOK_ENDPOINTS: z
    .string()
    .default("")
    .transform((s) =>
      s
        .split(",")
        .map((u) => u.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.url({ protocol: /^https?$/ }))),
  WEBHOOK_SIGNING_SECRET: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/=]{16,}$/, "WEBHOOK_SIGNING_SECRET must look like whsec_<base64>")
    .optional(),
});

export type Env = z.infer<typeof schema> & { APP_URL: string };

const requiredInProduction = ["DATABASE_URL", "SESSION_SECRET", "SEALING_KEY", "APP_URL"] as const;

export function parseEnv(source: Record<string, string | undefined>): Env {
  const result = schema.safeParse(source);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join("\n")}`);
  }
  const env = result.data;
  if (env.NODE_ENV === "production") {
    const missing = requiredInProduction.filter((k) => !env[k]);
    if (missing.length > 0) {
      throw new Error(
        `Refusing to start in production without: ${missing.join(", ")} (see .env.example)`,
      );
    }
  }
  if (env.WEBHOOK_ENDPOINTS.length > 0 && !env.WEBHOOK_SIGNING_SECRET) {
    throw new Error(
      "WEBHOOK_ENDPOINTS is set but WEBHOOK_SIGNING_SECRET is not (see .env.example)",
    );
  }
  return { ...env, APP_URL: env.APP_URL ?? `http://localhost:${env.PORT}` };
}

let cached: Env | undefined;

export function env(): Env {
  cached ??= parseEnv(process.env);
  return cached;
}

/** Tests change process.env between files; this drops the cached copy. */
export function resetEnvCache(): void {
  cached = undefined;
}
