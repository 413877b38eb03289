import { getInstance } from "../../app/server/agents/instances.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { isUnavailable, log, rt, STATE_DIR } from "../instances/engine.ts";

/** What the web awaits: done, or why not (unavailable: the container or Docker did not answer). */
export type RemoveSkillOutcome =
  | { ok: true }
  | { ok: false; failure: "unavailable" | "refused"; message: string };

/**
 * Deletes `<workspace>/skills/<name>` inside the instance's container (its state volume). Only a
 * folder of that exact shape under the state directory is touched; anything else is refused.
 */
export async function removeSkillFolder(
  payload: JobPayload<"remove-skill-folder">,
): Promise<RemoveSkillOutcome> {
  const { dir, name } = payload;
  const parts = dir.split("/");
  const shaped =
    dir.startsWith(`${STATE_DIR}/`) &&
    !parts.some((p) => p === ".." || p === ".") &&
    parts.at(-1) === name &&
    parts.at(-2) === "skills" &&
    /^[a-z0-9][a-z0-9-]*$/.test(name);
  if (!shaped) return { ok: false, failure: "refused", message: `not a skill folder: ${dir}` };
  const row = await getInstance(payload.instanceId);
  if (!row?.container_id) return { ok: false, failure: "unavailable", message: "no container" };
  try {
    const result = await rt().exec(row.container_id, ["rm", "-rf", "--", dir], {
      timeoutMs: 30_000,
    });
    if (result.exitCode !== 0) {
      return { ok: false, failure: "unavailable", message: result.stderr.slice(0, 300) };
    }
    return { ok: true };
  } catch (error) {
    log().warn({ err: error, ...payload }, "removing a skill folder failed");
    return {
      ok: false,
      failure: isUnavailable(error) ? "unavailable" : "refused",
      message: (error as Error).message.slice(0, 300),
    };
  }
}
