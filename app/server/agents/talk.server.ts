import { randomUUID } from "node:crypto";
import { creditRefusalIn } from "../ai/credit-refusal.server.ts";
import { modelSource } from "../ai/model-source.server.ts";
import { startTurn } from "../ai/turns.server.ts";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { isGatewayRefusal, toDomainError } from "../openclaw/connections.server.ts";
import {
  GatewayConnectError,
  GatewayRequestError,
  GatewayUnavailableError,
} from "../openclaw/errors.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { recordMessages } from "./agent-messages.server.ts";
import { type HistoryMessage, messagesOfHistory } from "./history.server.ts";
import { withGateway } from "./instance-gateway.server.ts";
import { waitWhileStarting } from "./progress.server.ts";
import { touchActivity } from "./sleep.server.ts";
import {
  contentText,
  history,
  resolveChatSession,
  setActiveSession,
  type Target,
  targetOf,
} from "./talk-sessions.server.ts";
import { hostTurnBudget } from "./turn-budget.server.ts";
import { wakeIfSleeping } from "./wake.server.ts";

// Talking to a user's agent (POST /api/agent, /api/chat, the chat page, the live socket): one
// chat turn through the user's own gateway over the control protocol, recorded in the
// platform's message store. Sessions are in talk-sessions, skills in talk-skills, health and
// credentials in talk-status. docs/decisions/0080-agent-interaction.md

/** A first chat after a gateway boot takes ~10 s; a model call can take longer. */
export const CHAT_TIMEOUT_MS = 120_000;
/**
 * How long a turn waits for its dropped gateway connection to come back (the cached client
 * reconnects within 0.25–5 s of a drop; a killed gateway's boot takes 20 s and more).
 */
export const TURN_DROP_GRACE_MS = 15_000;
// --- chat turns ---------------------------------------------------------------------------------

export interface TurnEvents {
  /** Streamed reply text as the gateway produces it (chat `delta` events). */
  onDelta?: (text: string, full: string) => void;
  /** Every gateway event of this run (chat and agent streams), for the live socket. */
  onEvent?: (event: string, payload: unknown) => void;
}

interface ChatEventPayload {
  runId?: string;
  sessionKey?: string;
  state?: string;
  deltaText?: string;
  errorMessage?: string;
  message?: { content?: unknown };
}

/**
 * OpenClaw 2026.9.x ends a run at once, before generating anything, when its processes hand over
 * the state database (StateDatabaseCoordinatorContentionError: seen in CI on a busy machine) and
 * when a config reload replaced the model runtime the run was prepared with ("plugin generation
 * was superseded": a first chat right after provisioning, which patches the config). The same
 * message sent again once the gateway has settled is answered.
 */
const TRANSIENT_RUN_ERROR =
  /StateDatabaseCoordinatorContentionError|PreparedModelRuntimeOwnerNotPublished|plugin generation was superseded/;
/** Waits before each resend of a run that ended with a transient error (a reload takes 1–2 s). */
const TRANSIENT_RETRY_DELAYS_MS = [1_000, 2_000];
/**
 * A gateway about to restart in place (a config change that needs one, a restart signal) refuses
 * new runs with GatewayDrainingError, then drops its sockets while it restarts: seen on the first
 * chat after a wake. The same message is sent again once it is back, for up to 30 s.
 */
const DRAINING = /Gateway is draining/i;
const DRAIN_RETRY_DELAYS_MS = [1_000, 2_000, 4_000, 8_000, 15_000];

/**
 * A gateway refuses connections for a few seconds when it restarts in place just after a boot
 * (seen on the first chat after a wake, although the wake had connected to it). A failed connect
 * sent nothing (GatewayConnectError), so the turn is tried again on a new connection.
 */
const CONNECT_RETRY_DELAYS_MS = [1_000, 2_000, 4_000];
/** How long a chat waits for a gateway that refuses its connection (connectGateway). */
const CHAT_CONNECT_PATIENCE_MS = 7_000;

/**
 * One chat turn (runTurnOnce); tried again for 7 s while the gateway refuses the connection, a
 * run the gateway ended with a transient internal error before any text is sent again, up to
 * twice, and one refused by a gateway draining for a restart is sent again until the gateway is
 * back.
 */
export async function runTurn(
  client: GatewayClient,
  sessionKey: string,
  message: string,
  events: TurnEvents = {},
): Promise<{ runId: string; reply: string }> {
  let streamed = false;
  let restarting = false;
  const sent: { delivered: Delivery } = { delivered: false };
  const watched: TurnEvents = {
    ...events,
    onDelta: (text, full) => {
      streamed = true;
      events.onDelta?.(text, full);
    },
  };
  for (let attempt = 0; ; attempt++) {
    try {
      return await runTurnOnce(client, sessionKey, message, watched, sent);
    } catch (error) {
      // A send that may have been taken is never sent again: the agent could get it twice.
      if (streamed || !(error instanceof Error) || sent.delivered === "unknown") {
        throw deliveredOr(error, sent.delivered);
      }
      // While a drained gateway restarts, its socket is closed and refused: keep waiting.
      restarting ||= DRAINING.test(error.message);
      const waiting =
        restarting && (DRAINING.test(error.message) || error instanceof GatewayUnavailableError);
      const delay = waiting
        ? DRAIN_RETRY_DELAYS_MS[attempt]
        : error instanceof GatewayConnectError
          ? CONNECT_RETRY_DELAYS_MS[attempt]
          : TRANSIENT_RUN_ERROR.test(error.message)
            ? TRANSIENT_RETRY_DELAYS_MS[attempt]
            : undefined;
      if (delay === undefined) throw deliveredOr(error, sent.delivered);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/**
 * Whether a turn's message reached the agent: not sent (false), taken (chat.send answered), or
 * sent with no answer (timed out, or the connection dropped after it went out): the gateway may
 * have taken it (decision 0246).
 */
type Delivery = false | true | "unknown";

/**
 * A turn that failed after the gateway had accepted its message (chat.send answered): the
 * message is in the agent's conversation (its messages will show it), so the error answer says
 * `delivered: true` and a client must not send it again as if it had been refused (issue 52: the
 * soak saw a 502 whose message was recorded). One whose send went unanswered says
 * `delivered: "unknown"`: the agent's messages tell. A failure before the send sent nothing.
 */
function deliveredOr(error: unknown, delivered: Delivery): unknown {
  if (delivered === false) return error;
  const answer = toDomainError(error);
  if (!(answer instanceof DomainError)) return error; // not the client's to know: a 500
  return new DomainError(answer.status, answer.message, { ...answer.extra, delivered });
}

/**
 * Sends one message with chat.send and waits for the run's final `chat` event. The listener is
 * registered before the send so no event of the run is missed. `sent.delivered` turns true once
 * the gateway has accepted the message.
 */
async function runTurnOnce(
  client: GatewayClient,
  sessionKey: string,
  message: string,
  events: TurnEvents,
  sent: { delivered: Delivery },
): Promise<{ runId: string; reply: string }> {
  const runId = randomUUID();
  let full = "";
  let off: () => void = () => {};
  let offDrop: () => void = () => {};
  let timer: NodeJS.Timeout | undefined;
  let dropTimer: NodeJS.Timeout | undefined;
  const done = new Promise<string>((resolve, reject) => {
    // A dropped connection that does not come back (the gateway was killed or restarts: its run
    // is gone) ends the turn after a grace, not at the reply's timeout; one that comes back
    // (the same gateway) keeps waiting, as its run's events reach the new connection.
    offDrop = client.onDrop(() => {
      dropTimer ??= setTimeout(() => {
        dropTimer = undefined;
        if (client.connected) return;
        clearTimeout(timer);
        reject(
          new GatewayUnavailableError(
            `chat: the connection to the gateway dropped during the turn and was not back within ${TURN_DROP_GRACE_MS} ms`,
          ),
        );
      }, TURN_DROP_GRACE_MS);
    });
    timer = setTimeout(
      () => reject(new GatewayUnavailableError(`chat: no reply within ${CHAT_TIMEOUT_MS} ms`)),
      CHAT_TIMEOUT_MS,
    );
    off = client.onEvent((event, raw) => {
      const payload = (raw ?? {}) as ChatEventPayload;
      if (payload.runId !== runId) return;
      events.onEvent?.(event, raw);
      if (event !== "chat") return;
      if (payload.state === "delta" && typeof payload.deltaText === "string") {
        full += payload.deltaText;
        events.onDelta?.(payload.deltaText, full);
      } else if (payload.state === "final") {
        clearTimeout(timer);
        resolve(contentText(payload.message?.content) || full);
      } else if (payload.state === "error" || payload.state === "aborted") {
        clearTimeout(timer);
        // The platform's own AI endpoint refused the turn (no credits): say so as a 402.
        const refusal = creditRefusalIn(payload.errorMessage);
        if (refusal) return reject(new DomainError(402, refusal));
        reject(
          new GatewayRequestError("chat", {
            code: payload.state.toUpperCase(),
            message: payload.errorMessage ?? `the agent's run ended: ${payload.state}`,
          }),
        );
      }
    });
  });
  // A send that fails never awaits `done`: its later rejection (the timer's) must not be an
  // unhandled one, which ends the process (the soak: web and worker exited 120 s after a turn
  // sent to a frozen gateway failed).
  done.catch(() => {});
  try {
    try {
      await client.request("chat.send", { sessionKey, message, idempotencyKey: runId });
    } catch (error) {
      // Written and unanswered in time: a gateway too busy to answer may still run it (the
      // soak's "refused" turns that were recorded). A connect that failed sent nothing; a drop
      // is a gateway restarting (drained: resent once it is back) or gone.
      if (error instanceof GatewayUnavailableError && /no response within/.test(error.message)) {
        sent.delivered = "unknown";
      }
      throw error;
    }
    sent.delivered = true;
    return { runId, reply: await done };
  } finally {
    clearTimeout(timer);
    clearTimeout(dropTimer);
    off();
    offDrop();
  }
}

/** Reads after a turn until its reply is in the history (the gateway keeps it just after). */
const RECORD_READS_MS = [0, 250, 500, 1_000, 2_000];

/**
 * Records the session's turns in the platform's message store (history.server.ts keys). The
 * gateway writes a turn to its history just after the run's final event, so a read at once can
 * miss it: the history is read again until it holds `reply` (the turn's own), a few seconds at
 * most. The soak lost every turn while the worker's recorder was stopped: the web's read came
 * too early and only the worker's recorded them.
 */
export async function recordSession(
  target: Target,
  client: GatewayClient,
  sessionKey: string,
  reply?: string,
): Promise<void> {
  if (!target.agent) return;
  let messages: ReturnType<typeof messagesOfHistory> = [];
  for (const wait of RECORD_READS_MS) {
    if (wait) await new Promise((r) => setTimeout(r, wait));
    // The same mapping (and dedupe keys) as the worker's recorder: a turn both see is stored once.
    messages = messagesOfHistory(
      sessionKey,
      (await history(client, sessionKey)) as HistoryMessage[],
    );
    const last = messages.at(-1);
    if (!reply || (last?.sender === "agent" && last.content === reply.trim())) break;
  }
  await recordMessages(target.agent, sessionKey, messages);
}

const pendingRecords = new Set<Promise<unknown>>();

/** Waits until the chat turns answered so far are recorded (tests, shutdown). */
export async function flushRecords(): Promise<void> {
  await Promise.all([...pendingRecords]);
}

/** One chat turn: the session (named, active or new), the agent's reply, recorded. */
export async function chat(
  userId: string,
  input: { message: string; sessionId?: string; agentId?: string },
  events: TurnEvents = {},
  options: {
    startWaitMs?: number;
    /** The person sending it (a member acting for an organisation): its calls' attribution. */
    personId?: string;
  } = {},
): Promise<{ sessionId: string; reply: string; timestamp: number }> {
  const target = await targetOf(userId, input.agentId);
  // A chat is activity (the agent stays awake) and wakes a sleeping agent (decision 0164).
  await touchActivity(userId);
  await wakeIfSleeping(userId, "chat");
  await waitWhileStarting(userId, options.startWaitMs);
  return explainFailedTurn(
    userId,
    withGateway(
      userId,
      async (client, instance) => {
        // Within the host's turn budget, or refused before anything reaches the gateway
        // (decision 0251). The gateway's model calls during the turn are attributed to it
        // (decision 0215).
        const endTurn = await startTurn(
          {
            instanceId: instance.id,
            agentId: target.agent?.id ?? null,
            personId: options.personId ?? null,
          },
          hostTurnBudget(instance.id, CHAT_TIMEOUT_MS),
        );
        let key: string;
        let reply: string;
        try {
          key = await resolveChatSession(client, instance, target, input.sessionId);
          await setActiveSession(userId, target, key);
          ({ reply } = await runTurn(client, key, input.message, events));
        } finally {
          void endTurn();
        }
        // Recording reads the gateway's history (its message ids are the dedupe keys); the reply
        // does not wait for it. A failure is logged; the next turn records the session again.
        const recorded = recordSession(target, client, key, reply).catch((error: unknown) =>
          logger().warn({ err: error, sessionKey: key }, "recording chat messages failed"),
        );
        pendingRecords.add(recorded);
        void recorded.finally(() => pendingRecords.delete(recorded));
        return { sessionId: key, reply, timestamp: Date.now() };
      },
      { patientMs: CHAT_CONNECT_PATIENCE_MS },
    ),
  );
}

/**
 * A turn the gateway failed while the user has no model source at all (no provider on the
 * server, no key of their own): the gateway only says its model was not found, so the 502 adds
 * what is missing, as the agent page says it.
 */
async function explainFailedTurn<T>(userId: string, turn: Promise<T>): Promise<T> {
  try {
    return await turn;
  } catch (error) {
    if (error instanceof DomainError && isGatewayRefusal(error)) {
      const { problem } = await modelSource(userId);
      if (problem?.kind === "no-provider") {
        throw new DomainError(
          502,
          `${error.message.replace(/\.+$/, "")}. ${problem.message}`,
          error.extra,
        );
      }
    }
    throw error;
  }
}
