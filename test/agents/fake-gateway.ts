import { createHash } from "node:crypto";
import { ws } from "msw";
import {
  ensureInstanceRecord,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { generateDeviceIdentity } from "../../app/server/openclaw/device-identity.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { mswServer } from "../msw/server.ts";

// A protocol-level fake of the parts of an OpenClaw gateway (2026.9.6) that the heartbeat and
// memory endpoints and a chat turn use, on msw's WebSocket interception: the connect handshake,
// config.get / config.patch (merge patch, base hash), agents.files.get / agents.files.set
// (MEMORY.md, expectedHash conflicts), sessions.create, chat.send (a run's chat events) and
// skills.status, with
// the errors the real gateway answers. The real gateway is
// covered by talk-real.test.ts.

export const FAKE_GATEWAY_ADDRESS = "gateway.test:18789";

/** The user's instance row, its gateway at `address`, paired and running (what provisioning leaves). */
export async function pairedInstanceAt(
  userId: string,
  address = FAKE_GATEWAY_ADDRESS,
): Promise<InstanceRow> {
  const row = await ensureInstanceRecord(userId, { plan: "solo" });
  return updateInstance(row.id, {
    gateway_address: address,
    device_id: `device-${row.id}`,
    device_private_key_sealed: seal(generateDeviceIdentity().privateKeyPem),
    paired_at: new Date(),
    observed_state: "running",
  });
}

/** The gateway's answer to a successful `connect` frame (hello-ok), as the fakes send it. */
export function helloOk(
  frame: { id: string; params: { scopes?: unknown } },
  connId: string,
  auth: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    type: "res",
    id: frame.id,
    ok: true,
    payload: {
      type: "hello-ok",
      protocol: 4,
      server: { version: "2026.9.6", connId },
      auth: { role: "operator", scopes: frame.params.scopes, ...auth },
    },
  });
}

export interface GatewayError {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

const sha = (text: string) => createHash("sha256").update(text).digest("hex");

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** RFC 7396 JSON merge patch, as OpenClaw's config.patch applies it (objects merge, null removes). */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Json = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

export interface FakeGatewayState {
  config: Json;
  files: Map<string, { content: string; updatedAtMs: number }>;
  agents: Set<string>;
  calls: Array<{ method: string; params: Json }>;
  /** Refuse the next N config.patch calls as a stale base hash (another writer came first). */
  staleHashes: number;
  /** Before the next agents.files.set with an expectedHash, this writer changes the file. */
  interleave?: (state: FakeGatewayState) => void;
  /** How a chat run ends: its reply, or the error OpenClaw reports for it. */
  run: { reply: string } | { error: string };
  /** chat.send refused with this error (the message never taken), instead of a run. */
  refuseSend?: GatewayError;
  /** Each session's history as chat.history answers it (a run's turn is added at its end). */
  histories: Map<string, Json[]>;
  /** chat.history reads that still miss the last turn (the gateway writes it just after). */
  historyLag: number;
  /** While true, a run's end waits in `held` until the test calls it (a turn still running). */
  hold: boolean;
  held: Array<() => void>;
  /** What skills.status lists (bundled skills need no marketplace install). */
  skills: Json[];
}

export function createFakeGateway() {
  const state: FakeGatewayState = {
    config: { agents: { defaults: { model: { primary: "platform/gpt-4o-mini" } } } },
    files: new Map(),
    agents: new Set(["main"]),
    calls: [],
    staleHashes: 0,
    run: { reply: "Hello from the fake" },
    hold: false,
    held: [],
    skills: [],
    histories: new Map(),
    historyLag: 0,
  };
  const hash = () => sha(JSON.stringify(state.config));
  const key = (agentId: string, name: string) => `${agentId}/${name}`;

  const fail = (error: GatewayError): never => {
    throw error;
  };
  const agentOf = (params: Json) => {
    const agentId = String(params.agentId);
    if (!state.agents.has(agentId))
      fail({ code: "INVALID_REQUEST", message: `agent "${agentId}" not found` });
    return agentId;
  };
  const fileView = (agentId: string, name: string) => {
    const file = state.files.get(key(agentId, name));
    if (!file) return { name, missing: true };
    return {
      name,
      missing: false,
      size: Buffer.byteLength(file.content),
      updatedAtMs: file.updatedAtMs,
      hash: sha(file.content),
      content: file.content,
    };
  };

  let sessions = 0;
  const methods: Record<string, (params: Json) => unknown> = {
    "sessions.create": (params) => ({ key: `agent:${agentOf(params)}:fake-${++sessions}` }),
    "chat.send": (params) =>
      state.refuseSend ? fail(state.refuseSend) : { runId: params.idempotencyKey },
    "skills.status": () => ({ skills: state.skills }),
    "chat.history": (params) => {
      const all = state.histories.get(String(params.sessionKey)) ?? [];
      if (state.historyLag > 0) {
        state.historyLag--;
        return { messages: all.slice(0, -2) }; // the last turn not written yet
      }
      return { messages: all };
    },
    "config.get": () => ({ exists: true, valid: true, hash: hash(), config: state.config }),
    "config.patch": (params) => {
      if (state.staleHashes > 0 || params.baseHash !== hash()) {
        state.staleHashes = Math.max(0, state.staleHashes - 1);
        return fail({
          code: "INVALID_REQUEST",
          message: "config changed since last load; re-run config.get and retry",
        });
      }
      state.config = mergePatch(state.config, JSON.parse(String(params.raw))) as Json;
      return { ok: true };
    },
    "agents.files.get": (params) => {
      const agentId = agentOf(params);
      return { agentId, file: fileView(agentId, String(params.name)) };
    },
    "agents.files.set": (params) => {
      const agentId = agentOf(params);
      const name = String(params.name);
      if (params.expectedHash) {
        state.interleave?.(state);
        state.interleave = undefined;
        const current = state.files.get(key(agentId, name));
        const currentHash = current ? sha(current.content) : undefined;
        if (currentHash !== params.expectedHash) {
          return fail({
            code: "INVALID_REQUEST",
            message: `agent file "${name}" changed since it was read`,
            details: { type: "agent_file_conflict", name, currentHash },
          });
        }
      }
      state.files.set(key(agentId, name), {
        content: String(params.content),
        updatedAtMs: Date.now(),
      });
      return { ok: true, agentId, file: fileView(agentId, name) };
    },
  };

  const link = ws.link(`ws://${FAKE_GATEWAY_ADDRESS}`);
  const handler = link.addEventListener("connection", ({ client }) => {
    client.send(
      JSON.stringify({
        type: "event",
        event: "connect.challenge",
        payload: { nonce: "nonce", ts: Date.now() },
      }),
    );
    client.addEventListener("message", (event) => {
      const frame = JSON.parse(String(event.data));
      if (frame.method === "connect") {
        client.send(helloOk(frame, "c1"));
        return;
      }
      state.calls.push({ method: frame.method, params: frame.params ?? {} });
      const method = methods[frame.method];
      if (!method) return; // never answers: the client's timeout fires
      try {
        const payload = method(frame.params ?? {});
        client.send(JSON.stringify({ type: "res", id: frame.id, ok: true, payload }));
        if (frame.method === "chat.send") {
          const run = state.run;
          const ended =
            "error" in run
              ? { state: "error", errorMessage: run.error }
              : { state: "final", message: { content: run.reply } };
          const end = () => {
            if ("reply" in run) {
              const key = String(frame.params.sessionKey);
              const id = String(frame.params.idempotencyKey);
              state.histories.set(key, [
                ...(state.histories.get(key) ?? []),
                { role: "user", content: frame.params.message, __openclaw: { id: `${id}-u` } },
                { role: "assistant", content: run.reply, __openclaw: { id: `${id}-a` } },
              ]);
            }
            client.send(
              JSON.stringify({
                type: "event",
                event: "chat",
                payload: { runId: frame.params.idempotencyKey, ...ended },
              }),
            );
          };
          if (state.hold) state.held.push(end);
          else end();
        }
      } catch (error) {
        client.send(JSON.stringify({ type: "res", id: frame.id, ok: false, error }));
      }
    });
  });

  return {
    state,
    /** Installs the fake (call in beforeEach; mswServer.resetHandlers removes it). */
    use: () => mswServer.use(handler),
    hash,
  };
}
