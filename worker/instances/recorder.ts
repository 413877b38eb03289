import { recordMessages } from "../../app/server/agents/agent-messages.server.ts";
import { agentOfSessionKey } from "../../app/server/agents/agents.server.ts";
import { onGatewayEndpointChange } from "../../app/server/agents/gateway-endpoints.server.ts";
import { messagesOfHistory, readHistory } from "../../app/server/agents/history.server.ts";
import {
  gatewayTokenOf,
  type InstanceRow,
  listInstances,
} from "../../app/server/agents/instances.server.ts";
import { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { deviceIdentityFromPrivateKey } from "../../app/server/openclaw/device-identity.server.ts";
import { unseal } from "../../app/server/platform/crypto.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";

// The chat recorder: one gateway connection per running, paired instance. When a chat turn
// ends (`chat` event, state final or error) it reads that session's history (`chat.history`)
// and records the messages with recordMessages; dedupe keys make re-reading harmless. On every
// refresh it also sweeps the sessions that changed (sessions.list updatedAt), so turns whose
// event it missed (the worker was away, the socket dropped) are caught up. Channel conversations are thereby stored as they happen and survive a
// container reset.

const log = () => logger().child({ area: "recorder" });

/** Reads one session's recent history and records it; returns how many messages were new. */
export async function recordSession(
  client: GatewayClient,
  row: Pick<InstanceRow, "user_id">,
  sessionKey: string,
): Promise<number> {
  const agent = await agentOfSessionKey(row.user_id, sessionKey);
  if (!agent) return 0; // a session of an agent the platform does not know
  const history = await readHistory(client, sessionKey);
  return recordMessages(agent, sessionKey, messagesOfHistory(sessionKey, history));
}

interface Watched {
  key: string;
  row: InstanceRow;
  client: GatewayClient;
  /** Each session's updatedAt when it was last recorded. */
  seen: Map<string, unknown>;
}

/**
 * Records the sessions that changed since the last sweep (all of them after a (re)start):
 * catches up turns whose `chat` event this connection did not see. A session whose recording
 * fails is tried again at the next sweep and does not hold up the others; the first failure is
 * thrown once all were tried.
 */
export async function sweepSessions(
  w: Pick<Watched, "client" | "seen"> & { row: Pick<InstanceRow, "user_id"> },
): Promise<number> {
  const list = await w.client.request<{ sessions?: Array<{ key?: string; updatedAt?: unknown }> }>(
    "sessions.list",
    { limit: 100 },
  );
  let n = 0;
  let failure: { error: unknown } | undefined;
  for (const s of list.sessions ?? []) {
    if (!s.key || (w.seen.has(s.key) && w.seen.get(s.key) === s.updatedAt)) continue;
    try {
      n += await recordSession(w.client, w.row, s.key);
      w.seen.set(s.key, s.updatedAt);
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure) throw failure.error;
  return n;
}

const keyOf = (row: InstanceRow) =>
  `${row.gateway_address}|${row.device_id}|${row.device_token_sealed ?? ""}`;

export class ChatRecorder {
  readonly #watched = new Map<string, Watched>();
  #timer: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;
  #refreshing = false;

  /** Drops the connection to a gateway whose endpoint changed (decision 0195); the next
   * refresh opens one to the new endpoint if the instance still runs. */
  #drop(instanceId: string | undefined): void {
    for (const [id, w] of this.#watched) {
      if (instanceId !== undefined && id !== instanceId) continue;
      w.client.close();
      this.#watched.delete(id);
    }
  }

  /** Opens connections to newly running instances and closes those that went away. */
  async refresh(): Promise<void> {
    if (this.#refreshing) return;
    this.#refreshing = true;
    try {
      const rows = (await listInstances()).filter(
        (r) =>
          r.observed_state === "running" &&
          r.gateway_address &&
          r.paired_at &&
          r.device_private_key_sealed,
      );
      const live = new Set(rows.map((r) => r.id));
      for (const [id, w] of this.#watched) {
        if (!live.has(id)) {
          w.client.close();
          this.#watched.delete(id);
        }
      }
      for (const row of rows) {
        const current = this.#watched.get(row.id);
        if (current?.key === keyOf(row)) continue;
        current?.client.close();
        this.#watch(row);
      }
      await Promise.all(
        [...this.#watched.values()].map((w) =>
          w.client.hello
            ? sweepSessions(w).catch((error) =>
                log().debug({ err: error, instanceId: w.row.id }, "session sweep failed"),
              )
            : undefined,
        ),
      );
    } finally {
      this.#refreshing = false;
    }
  }

  #watch(row: InstanceRow): void {
    const client = new GatewayClient({
      url: `ws://${row.gateway_address}`,
      token: gatewayTokenOf(row),
      device: deviceIdentityFromPrivateKey(unseal(row.device_private_key_sealed as string)),
      connectTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      reconnect: true,
    });
    client.onEvent((event, payload) => {
      if (event !== "chat") return;
      const p = payload as { state?: string; sessionKey?: string };
      if (!p.sessionKey || (p.state !== "final" && p.state !== "error")) return;
      recordSession(client, row, p.sessionKey).catch((error) =>
        log().warn({ err: error, instanceId: row.id }, "recording a chat turn failed"),
      );
    });
    this.#watched.set(row.id, { key: keyOf(row), row, client, seen: new Map() });
    client
      .connect()
      .catch((error) =>
        log().debug({ err: error, instanceId: row.id }, "recorder connection failed; retrying"),
      );
  }

  start(everyMs: number): this {
    const tick = () =>
      this.refresh().catch((error) => log().warn({ err: error }, "recorder refresh failed"));
    this.#unsubscribe = onGatewayEndpointChange((id) => {
      this.#drop(id);
      void tick();
    });
    void tick();
    this.#timer = setInterval(tick, everyMs);
    this.#timer.unref();
    return this;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#unsubscribe?.();
    this.#drop(undefined);
  }

  get watching(): number {
    return this.#watched.size;
  }

  /** How many of the watched gateways have completed the handshake (their sweeps run). */
  get connected(): number {
    return [...this.#watched.values()].filter((w) => w.client.hello).length;
  }
}

/** Starts the recorder (AGENT_MESSAGE_RECORDER=on); returns a stop function. */
export function startRecorder(): () => void {
  if (env().AGENT_MESSAGE_RECORDER !== "on") return () => {};
  const recorder = new ChatRecorder().start(Math.max(env().INSTANCE_SAMPLE_INTERVAL_MS, 5_000));
  return () => recorder.stop();
}
