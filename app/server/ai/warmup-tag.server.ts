import { createHmac } from "node:crypto";
import { safeEqual, sealingKey } from "../platform/crypto.server.ts";
import type { ChatMessage } from "./providers/shared.server.ts";

// A tenant gateway's dry-run turn (after provisioning or a boot, decision 0087) runs under the
// tenant's own model-endpoint token, so the gateway's config is never swapped and the tenant's
// real messages meanwhile go to their model as usual. The dry run's prompt carries a tag (an
// HMAC of the instance id and an expiry under a key derived from the sealing key); the agents'
// endpoint answers a tagged turn of that same instance itself: no provider call, nothing
// metered. A forged, expired or another instance's tag is an ordinary prompt.
// The MAC is hex: OpenClaw masks token-like strings when it sends a session's messages again
// (a continuation of the dry run), and ~1 % of base64url MACs matched one of its vendor-token
// patterns (measured: 46 of 5,000; hex: 0 of 20,000); the masked tag went to the provider as a
// tenant's prompt, metered.

const TTL_MS = 15 * 60_000;
const MARK = "[warm-up ";
const PATTERN = /\[warm-up ([0-9a-z]{1,11})\.([0-9a-f]{64})\]/;

let keys: { base: Buffer; derived: Buffer } | undefined;
function tagKey(): Buffer {
  const base = sealingKey();
  if (keys?.base !== base) {
    keys = { base, derived: createHmac("sha256", base).update("warm-up tag").digest() };
  }
  return keys.derived;
}

const mac = (instanceId: string, expires: string) =>
  createHmac("sha256", tagKey()).update(`${instanceId}\n${expires}`).digest("hex");

/** The tag a dry-run prompt of `instanceId` carries (valid for 15 minutes). */
export function warmUpTag(instanceId: string, now = Date.now()): string {
  const expires = (now + TTL_MS).toString(36);
  return `${MARK}${expires}.${mac(instanceId, expires)}]`;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => {
      const text = (part as { text?: unknown } | null)?.text;
      return typeof text === "string" ? text : "";
    })
    .join("\n");
}

/**
 * Whether the request is a dry-run turn of `instanceId`: a user message of its last turn (the
 * user messages after the last assistant or tool message; OpenClaw appends its own context as
 * a second user message) or of its first turn carries a valid tag. The first turn covers the
 * gateway's own continuations of a dry-run session: a dry run always starts a session of its
 * own, and when its attempt ends without a visible answer (a retry under load) OpenClaw
 * continues that session with an instruction of its own as the last user message; that call
 * is the platform's warm-up as much as the first, and a tenant's session never starts with a
 * tag (decision 0087).
 */
export function isWarmUpTurn(messages: ChatMessage[], instanceId: string, now = Date.now()) {
  return (
    tagged(turnOf(messages, messages.length - 1, -1), instanceId, now) ||
    tagged(turnOf(messages, 0, 1), instanceId, now)
  );
}

/** The user messages of the turn that starts at `from` and runs in `step`'s direction. */
function turnOf(messages: ChatMessage[], from: number, step: 1 | -1): ChatMessage[] {
  const turn: ChatMessage[] = [];
  for (let i = from; i >= 0 && i < messages.length; i += step) {
    const message = messages[i];
    if (message?.role === "assistant" || message?.role === "tool") break;
    if (message?.role === "user") turn.push(message);
  }
  return turn;
}

function tagged(turn: ChatMessage[], instanceId: string, now: number): boolean {
  return turn.some((message) => {
    const text = textOf(message.content);
    // The common case costs one substring search per message of the turn.
    return text.includes(MARK) && validTag(text, instanceId, now);
  });
}

function validTag(text: string, instanceId: string, now: number): boolean {
  const match = PATTERN.exec(text);
  if (!match) return false;
  const [, expires = "", given = ""] = match;
  const at = Number.parseInt(expires, 36);
  if (!(at > now) || at - now > TTL_MS) return false;
  return safeEqual(given, mac(instanceId, expires));
}
