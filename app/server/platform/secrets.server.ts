import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { env } from "./env.server.ts";

// SESSION_SECRET and SEALING_KEY come from the environment (required in production). Locally,
// when unset, random ones are generated once and kept in DATA_DIR/secrets.json (mode 0600), so
// sessions and sealed values survive restarts of a laptop install.

export interface Secrets {
  sessionSecret: string;
  /** 32-byte AES-256-GCM key, hex. */
  sealingKey: string;
}

const stored = z.object({
  sessionSecret: z.string().min(32),
  sealingKey: z.string().regex(/^[0-9a-f]{64}$/i),
});

let cached: { dir: string; secrets: Secrets } | undefined;

function localSecrets(dataDir: string): Secrets {
  const file = path.join(dataDir, "secrets.json");
  try {
    return stored.parse(JSON.parse(readFileSync(file, "utf8")));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new Error(`${file} is unreadable or invalid; delete it to generate new secrets`, {
        cause: error,
      });
    }
  }
  const secrets: Secrets = {
    sessionSecret: randomBytes(32).toString("base64url"),
    sealingKey: randomBytes(32).toString("hex"),
  };
  mkdirSync(dataDir, { recursive: true });
  try {
    // `wx`: two processes starting at once must not overwrite each other's secrets.
    writeFileSync(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600, flag: "wx" });
    chmodSync(file, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return localSecrets(dataDir);
    throw error;
  }
  return secrets;
}

export function secrets(): Secrets {
  const { SESSION_SECRET, SEALING_KEY, DATA_DIR, NODE_ENV } = env();
  if (SESSION_SECRET && SEALING_KEY) {
    return { sessionSecret: SESSION_SECRET, sealingKey: SEALING_KEY };
  }
  if (NODE_ENV === "production") {
    // parseEnv already refuses this; kept so no code path invents secrets in production.
    throw new Error("SESSION_SECRET and SEALING_KEY are required in production");
  }
  if (cached?.dir !== DATA_DIR) cached = { dir: DATA_DIR, secrets: localSecrets(DATA_DIR) };
  return {
    sessionSecret: SESSION_SECRET ?? cached.secrets.sessionSecret,
    sealingKey: SEALING_KEY ?? cached.secrets.sealingKey,
  };
}
