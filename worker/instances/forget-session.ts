import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { rt, STATE_DIR } from "./engine.ts";

/**
 * Deletes a session and its transcript, including the copy the gateway archives on delete.
 * The session is reset first: a used session deleted straight away leaves its reclamation to
 * the gateway's next turn, which then took 3.7–5.7 s instead of 0.8–1.0 s (a new SQLite worker
 * thread, ~2 s of CPU); reset first, the delete does that work itself (decision 0038). Used by
 * the dry runs (warm-up.ts) and by reset-memory.
 */
export async function forgetSession(
  client: GatewayClient,
  containerId: string,
  key: string,
): Promise<void> {
  await client.request("sessions.reset", { key }, { timeoutMs: 120_000 });
  // Deleting takes the gateway 1–20 s on a busy machine (SQLite reclamation).
  const result = await client.request<{ archived?: string[] }>(
    "sessions.delete",
    { key, deleteTranscript: true },
    { timeoutMs: 120_000 },
  );
  const archived = (result.archived ?? []).filter((p) => p.startsWith(`${STATE_DIR}/`));
  if (archived.length === 0) return;
  const removed = await rt().exec(containerId, ["rm", "-f", "--", ...archived], {
    timeoutMs: 30_000,
  });
  if (removed.exitCode !== 0) {
    throw new Error(`removing the warm-up transcript failed: ${removed.stderr.slice(0, 300)}`);
  }
}
