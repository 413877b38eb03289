import { createHmac } from "node:crypto";
import { db } from "../platform/db.server.ts";
import { type Queryable, txExecutor } from "../platform/db-helpers.server.ts";
import { env } from "../platform/env.server.ts";
import { newId } from "../platform/ids.server.ts";
import { sendJob } from "../platform/jobs.server.ts";

// Outgoing events, delivered to the operator's endpoints (WEBHOOK_ENDPOINTS) the Standard
// Webhooks way: body {type, timestamp, data}, headers webhook-id / webhook-timestamp /
// webhook-signature ("v1,<base64 HMAC-SHA256 of `${id}.${timestamp}.${body}`>"), one
// `deliver-webhook` job per endpoint with retries and backoff, each attempt recorded.
// docs/decisions/0015-outgoing-events.md

export const eventTypes = ["user.created", "user.updated", "user.deleted"] as const;
export type EventType = (typeof eventTypes)[number];

/**
 * Records the event and enqueues its deliveries inside the caller's transaction: the event
 * goes out if and only if the change that caused it commits.
 */
export async function emitEvent(t: Queryable, type: EventType, data: object): Promise<string> {
  const id = newId("msg");
  await t`insert into events (id, type, data) values (${id}, ${type}, ${t.json(data as never)})`;
  for (const url of env().WEBHOOK_ENDPOINTS) {
    await sendJob("deliver-webhook", { eventId: id, url }, { db: txExecutor(t) });
  }
  return id;
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.replace(/^whsec_/, ""), "base64");
}

/** The webhook-signature header value for one message. */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const mac = createHmac("sha256", secretBytes(secret))
    .update(`${id}.${timestamp}.${body}`)
    .digest("base64");
  return `v1,${mac}`;
}

/** Checks a webhook-signature header (any of its space-separated signatures) and the age. */
export function verifyWebhook(
  secret: string,
  headers: Headers,
  body: string,
  toleranceSeconds = 300,
): boolean {
  const id = headers.get("webhook-id");
  const timestamp = Number(headers.get("webhook-timestamp"));
  const signatures = (headers.get("webhook-signature") ?? "").split(" ");
  if (!id || !Number.isInteger(timestamp)) return false;
  if (Math.abs(Date.now() / 1000 - timestamp) > toleranceSeconds) return false;
  const expected = signWebhook(secret, id, timestamp, body);
  return signatures.some((s) => s === expected);
}

const DELIVERY_TIMEOUT_MS = 10_000;

export interface DeliveryResult {
  status: number;
  attempt: number;
}

/**
 * One delivery attempt of an event to one endpoint, recorded in webhook_deliveries. Throws on
 * anything but a 2xx so pg-boss retries with backoff. An event that no longer exists (its user
 * was deleted) is still delivered: events rows are not removed with users.
 */
export async function deliverEvent(
  eventId: string,
  url: string,
  attempt: number,
): Promise<DeliveryResult> {
  const sql = db();
  const [event] = await sql<{ id: string; type: string; data: object; created_at: Date }[]>`
    select id, type, data, created_at from events where id = ${eventId}`;
  if (!event) return { status: 0, attempt }; // nothing to send (never committed)
  const secret = env().WEBHOOK_SIGNING_SECRET;
  if (!secret) throw new Error("WEBHOOK_SIGNING_SECRET is not configured");
  const body = JSON.stringify({
    type: event.type,
    timestamp: event.created_at.toISOString(),
    data: event.data,
  });
  const timestamp = Math.floor(Date.now() / 1000);
  const started = performance.now();
  let status: number | null = null;
  let error: string | null = null;
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "agent-platform-webhooks/1",
        "webhook-id": event.id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signWebhook(secret, event.id, timestamp, body),
      },
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
    });
    status = response.status;
    await response.body?.cancel();
    if (status < 200 || status >= 300) error = `endpoint answered ${status}`;
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
  }
  await sql`
    insert into webhook_deliveries (event_id, url, attempt, status, error, duration_ms)
    values (${event.id}, ${url}, ${attempt}, ${status}, ${error},
            ${Math.round(performance.now() - started)})`;
  if (error) throw new Error(`webhook delivery to ${url} failed: ${error}`);
  return { status: status ?? 0, attempt };
}
