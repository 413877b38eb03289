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
