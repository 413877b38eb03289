import { readFileSync } from "node:fs";

// Docker (and Kubernetes) secrets arrive as files under /run/secrets/, not as variables: every
// secret setting may be given as <NAME>_FILE=/path instead of <NAME>. Resolved here, once,
// before the schema parses the environment, so no setting needs code of its own.

/** The settings that are secrets (credentials, keys, URLs carrying a password). */
export const SECRET_SETTINGS = [
  "DATABASE_URL",
  "SESSION_SECRET",
  "SEALING_KEY",
  "SMTP_URL",
  "OPENAI_API_KEY",
  "ANTHROPIC_API_KEY",
  "GOOGLE_API_KEY",
  "OPENROUTER_API_KEY",
  "OAUTH1_CLIENT_SECRET",
  "OAUTH2_CLIENT_SECRET",
  "OIDC_CLIENT_SECRET",
  "WEBHOOK_SIGNING_SECRET",
  "STRIPE_SECRET_KEY",
  "STRIPE_WEBHOOK_SECRET",
  "MUX_TOKEN_ID",
  "MUX_TOKEN_SECRET",
  "BACKUP_S3_ACCESS_KEY_ID",
  "BACKUP_S3_SECRET_ACCESS_KEY",
  "POSTGRES_PASSWORD",
  "METRICS_TOKEN",
] as const;

const SUFFIX = "_FILE";

export type ReadFile = (path: string) => string;

const readUtf8: ReadFile = (path) => readFileSync(path, "utf8");

/**
 * A copy of `source` where each secret's `<NAME>_FILE` is replaced by `<NAME>` holding the
 * file's content (trailing newlines trimmed: `echo … | docker secret create` adds one).
 * `settings` are the schema's keys: a `_FILE` of a known non-secret setting is refused (it
 * would otherwise be ignored silently); other `*_FILE` variables belong to other programs.
 * Errors name the variable and the path, never the content.
 */
export function resolveSecretFiles(
  source: Record<string, string | undefined>,
  settings: ReadonlySet<string>,
  read: ReadFile = readUtf8,
): Record<string, string | undefined> {
  const secrets = new Set<string>(SECRET_SETTINGS);
  const resolved: Record<string, string | undefined> = { ...source };
  const problems: string[] = [];
  for (const [key, path] of Object.entries(source)) {
    if (!key.endsWith(SUFFIX) || path === undefined || path === "") continue;
    const name = key.slice(0, -SUFFIX.length);
    if (!secrets.has(name)) {
      if (settings.has(name)) problems.push(`${key}: ${name} is not a secret; set ${name} itself`);
      continue;
    }
    delete resolved[key];
    if (source[name] !== undefined && source[name] !== "") {
      problems.push(`${name} and ${key} are both set; keep one`);
      continue;
    }
    let content: string;
    try {
      content = read(path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "unreadable";
      problems.push(`${key}: cannot read ${path} (${code})`);
      continue;
    }
    const value = content.replace(/[\r\n]+$/, "");
    if (value === "") {
      problems.push(`${key}: ${path} is empty`);
      continue;
    }
    resolved[name] = value;
  }
  if (problems.length > 0) {
    throw new Error(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  }
  return resolved;
}
