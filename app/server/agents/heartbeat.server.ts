import { z } from "zod";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { GatewayRequestError } from "../openclaw/errors.server.ts";
import { withGateway } from "./instance-gateway.server.ts";

// Heartbeat settings (GET/POST/DELETE /api/heartbeat): OpenClaw's periodic agent turn, configured
// in the gateway at `agents.defaults.heartbeat` (OpenClaw 2026.9.6, docs/gateway/heartbeat.md).
// The gateway's config is the only copy: read with config.get, changed with a merge patch
// (config.patch; null removes a key, so the gateway's own default applies again). Users set an
// allow-listed subset of the schema; delivery routing (`to`, `accountId`, `session`), the model
// and the ambient owner are not theirs to set. docs/decisions/0091-heartbeat-and-memory-endpoints.md

/** Keys of `agents.defaults.heartbeat` a user may set (OpenClaw's heartbeat schema is strict). */
export const HEARTBEAT_KEYS = [
  "every",
  "activeHours",
  "prompt",
  "target",
  "lightContext",
  "isolatedSession",
  "timeoutSeconds",
] as const;

/** OpenClaw's defaults where a key is unset (docs/gateway/heartbeat.md, "Defaults"). */
export const HEARTBEAT_DEFAULT_EVERY = "30m";
export const HEARTBEAT_DEFAULT_TARGET = "owner";
/** What the API writes for "disabled": OpenClaw's own convention (recurring cadence off). */
export const HEARTBEAT_OFF = "0m";
/**
 * The platform's heartbeat settings for a new gateway and after DELETE: no recurring heartbeat.
 * OpenClaw's default (every 30 minutes to the owner's DM, i.e. as soon as a channel names an
 * owner) is a full agent turn billed to the user every half hour that nobody asked for; users
 * turn it on with POST /api/heartbeat (decision 0091).
 */
export const PLATFORM_HEARTBEAT = { every: HEARTBEAT_OFF } as const;

/** Every heartbeat is a full agent turn billed to the user: a platform floor and ceiling. */
export const HEARTBEAT_MIN_EVERY_MS = 5 * 60_000;
export const HEARTBEAT_MAX_EVERY_MS = 24 * 60 * 60_000;
export const HEARTBEAT_PROMPT_MAX_CHARS = 4_000;
export const HEARTBEAT_TIMEOUT_MAX_SECONDS = 3_600;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration in milliseconds as OpenClaw parses `heartbeat.every` (parseDurationMs with default
 * unit minutes: "30m", "1h30m", "45" = 45 minutes), or undefined when it would refuse it.
 */
export function parseEvery(raw: string): number | undefined {
  const text = raw.trim().toLowerCase();
  if (!text) return undefined;
  const single = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text);
  if (single) return Math.round(Number(single[1]) * (UNIT_MS[single[2] ?? "m"] as number));
  let total = 0;
  let consumed = 0;
  for (const match of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)) {
    if (match.index !== consumed) return undefined;
    total += Number(match[1]) * (UNIT_MS[match[2] as string] as number);
    consumed += match[0].length;
  }
  if (consumed !== text.length || consumed === 0) return undefined;
  return Math.round(total);
}

const TIME = /^([01]\d|2[0-3]):[0-5]\d$/;

function validTimezone(tz: string): boolean {
  if (tz === "user" || tz === "local") return true;
  try {
    new Intl.DateTimeFormat("en", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const activeHoursSchema = z
  .object({
    start: z.string().regex(TIME, 'must be "HH:MM" (00:00–23:59)'),
    end: z.string().refine((v) => TIME.test(v) || v === "24:00", 'must be "HH:MM" (00:00–24:00)'),
    timezone: z
      .string()
      .max(64)
      .refine(validTimezone, 'must be an IANA time zone, "user" or "local"')
      .optional(),
  })
  .strict()
  .refine((v) => v.start !== v.end, "start and end must differ (an empty window never runs)");

/**
 * POST /api/heartbeat: every field optional (an absent one is left as it is), null resets one
 * field to OpenClaw's default; any other key is refused.
 */
export const heartbeatUpdateSchema = z
  .object({
    enabled: z.boolean().optional(),
    every: z
      .string()
      .max(32)
      .refine((v) => parseEvery(v) !== undefined, "must be a duration like 30m, 2h, 1h30m")
      .nullable()
      .optional(),
    prompt: z
      .string()
      .max(HEARTBEAT_PROMPT_MAX_CHARS)
      .refine((v) => v.trim() !== "", "must not be blank")
      .nullable()
      .optional(),
    activeHours: activeHoursSchema.nullable().optional(),
    target: z.enum(["owner", "last", "none"]).nullable().optional(),
    lightContext: z.boolean().nullable().optional(),
    isolatedSession: z.boolean().nullable().optional(),
    timeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(HEARTBEAT_TIMEOUT_MAX_SECONDS)
      .nullable()
      .optional(),
  })
  .strict()
  .superRefine((v, ctx) => {
    const set = Object.values(v).some((x) => x !== undefined);
    if (!set) {
      ctx.addIssue({
        code: "custom",
        message: `send at least one of enabled, ${HEARTBEAT_KEYS.join(", ")}`,
      });
      return;
    }
    const ms = typeof v.every === "string" ? parseEvery(v.every) : undefined;
    if (ms === undefined) return;
    if (ms > 0 && (ms < HEARTBEAT_MIN_EVERY_MS || ms > HEARTBEAT_MAX_EVERY_MS)) {
      ctx.addIssue({
        code: "custom",
        path: ["every"],
        message: "must be between 5m and 24h (0m disables)",
      });
    }
    if (v.enabled !== undefined && v.enabled !== ms > 0) {
      ctx.addIssue({
        code: "custom",
        path: ["enabled"],
        message: `contradicts every: ${v.every}`,
      });
    }
  });

export type HeartbeatUpdate = z.infer<typeof heartbeatUpdateSchema>;

type Raw = Record<string, unknown>;

const isObject = (v: unknown): v is Raw => typeof v === "object" && v !== null && !Array.isArray(v);

/** The settings as the API shows them: OpenClaw's defaults filled in, plus what is set. */
export function heartbeatView(configured: Raw) {
  const every = typeof configured.every === "string" ? configured.every : HEARTBEAT_DEFAULT_EVERY;
  return {
    heartbeat: {
      enabled: (parseEvery(every) ?? 1) > 0,
      every,
      /** null: OpenClaw's built-in prompt. */
      prompt: typeof configured.prompt === "string" ? configured.prompt : null,
      /** null: all day. */
      activeHours: isObject(configured.activeHours) ? configured.activeHours : null,
      target: typeof configured.target === "string" ? configured.target : HEARTBEAT_DEFAULT_TARGET,
      lightContext: configured.lightContext === true,
      isolatedSession: configured.isolatedSession === true,
      /** null: the agent timeout, else the cadence capped at 600 s. */
      timeoutSeconds:
        typeof configured.timeoutSeconds === "number" ? configured.timeoutSeconds : null,
    },
    /** Exactly what the gateway's `agents.defaults.heartbeat` holds ({} when nothing is set). */
    configured,
  };
}

interface ConfigSnapshot {
  hash?: string;
  config?: { agents?: { defaults?: { heartbeat?: unknown } } };
}

export async function readHeartbeat(
  client: GatewayClient,
): Promise<{ hash?: string; configured: Raw }> {
  const snapshot = await client.request<ConfigSnapshot>("config.get");
  const configured = snapshot.config?.agents?.defaults?.heartbeat;
  return { hash: snapshot.hash, configured: isObject(configured) ? configured : {} };
}

/** The merge patch of `agents.defaults.heartbeat` for an update, given what is set now. */
export function heartbeatPatch(update: HeartbeatUpdate, configured: Raw): Raw {
  const patch: Raw = {};
  for (const key of HEARTBEAT_KEYS) {
    const value = update[key];
    if (value === undefined) continue;
    // activeHours is replaced as a whole: a timezone left out is removed, not merged.
    patch[key] =
      key === "activeHours" && value !== null
        ? { timezone: null, ...(value as Raw) }
        : (value as unknown);
  }
  if (update.enabled === false) patch.every = HEARTBEAT_OFF;
  if (update.enabled === true && update.every === undefined) {
    // Turning it on again: a disabled cadence goes back to OpenClaw's default.
    const now = typeof configured.every === "string" ? parseEvery(configured.every) : undefined;
    if (now === 0) patch.every = null;
  }
  return patch;
}

const CONFIG_CHANGED = /config changed since last load/i;

/**
 * config.get, then config.patch of `agents.defaults.heartbeat` with the base hash; a concurrent
 * change (another writer: the worker's agent sync, a channel) is read again, up to 3 times.
 * `next` answers the new value of the block (null removes it), or undefined for nothing to do.
 */
async function patchHeartbeat(
  client: GatewayClient,
  next: (configured: Raw) => Raw | null | undefined,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const { hash, configured } = await readHeartbeat(client);
    const heartbeat = next(configured);
    if (heartbeat === undefined) return;
    try {
      await client.request(
        "config.patch",
        { baseHash: hash, raw: JSON.stringify({ agents: { defaults: { heartbeat } } }) },
        { timeoutMs: 30_000 },
      );
      return;
    } catch (error) {
      const retry =
        error instanceof GatewayRequestError && CONFIG_CHANGED.test(error.message) && attempt < 3;
      if (!retry) throw error;
    }
  }
}

/** The instance's heartbeat settings as its gateway reports them. */
export async function getHeartbeat(userId: string) {
  return withGateway(userId, async (client) =>
    heartbeatView((await readHeartbeat(client)).configured),
  );
}

/** Applies an update; answers the settings as the gateway reports them afterwards. */
export async function updateHeartbeat(userId: string, update: HeartbeatUpdate) {
  return withGateway(userId, async (client) => {
    await patchHeartbeat(client, (configured) => heartbeatPatch(update, configured));
    return heartbeatView((await readHeartbeat(client)).configured);
  });
}

/** Back to the platform's settings (PLATFORM_HEARTBEAT): every other key removed. */
export async function resetHeartbeat(userId: string) {
  return withGateway(userId, async (client) => {
    await patchHeartbeat(client, (configured) => {
      const keys = Object.keys(configured);
      const isDefault = keys.length === 1 && configured.every === PLATFORM_HEARTBEAT.every;
      if (isDefault) return undefined;
      return {
        ...Object.fromEntries(keys.map((key) => [key, null])),
        ...PLATFORM_HEARTBEAT,
      };
    });
    return heartbeatView((await readHeartbeat(client)).configured);
  });
}
