import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { env } from "./env.server.ts";

// SESSION_SECRET and SEALING_KEY come from the environment (required in production). Locally,
// when unset, random ones are generated once and kept in DATA_DIR/secrets.json (mode 0600), so
// sessions and sealed values survive restarts of a laptop install. This module is the only
// reader and writer of that file (the sealing key too, crypto.server.ts).

export interface Secrets {
  sessionSecret: string;
  /** 32-byte AES-256-GCM key, hex. */
  sealingKey: string;
}

// Each field may be missing (a file from an older version held only the sealing key), never
// invalid; other fields are kept.
const stored = z.looseObject({
  sessionSecret: z.string().min(32).optional(),
  sealingKey: z
    .string()
    .regex(/^[0-9a-f]{64}$/i)
    .optional(),
});

let cached: { dir: string; secrets: Secrets } | undefined;

function readStored(file: string): z.infer<typeof stored> | undefined {
  try {
    return stored.parse(JSON.parse(readFileSync(file, "utf8")));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`${file} is unreadable or invalid; delete it to generate new secrets`, {
      cause: error,
    });
  }
}

function localSecrets(dataDir: string): Secrets {
  const file = path.join(dataDir, "secrets.json");
  const found = readStored(file);
  if (found?.sessionSecret && found.sealingKey) {
    return { sessionSecret: found.sessionSecret, sealingKey: found.sealingKey };
  }
  const secrets: Secrets = {
    sessionSecret: found?.sessionSecret ?? randomBytes(32).toString("base64url"),
    sealingKey: found?.sealingKey ?? randomBytes(32).toString("hex"),
  };
  mkdirSync(dataDir, { recursive: true });
  // Written whole to a sibling first: no reader ever sees half a file.
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  writeFileSync(tmp, `${JSON.stringify({ ...found, ...secrets }, null, 2)}\n`, { mode: 0o600 });
  try {
    if (found) {
      renameSync(tmp, file); // completes an older file
    } else {
      // Only if still absent: two processes starting at once keep the first one's secrets.
      linkSync(tmp, file);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return localSecrets(dataDir);
    throw error;
  } finally {
    rmSync(tmp, { force: true });
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
