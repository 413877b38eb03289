import type { GatewayClient } from "../openclaw/client.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { channelCredentialFlags } from "./channels.server.ts";
import { withGateway } from "./instance-gateway.server.ts";

// Linking WhatsApp (chatapp3). OpenClaw's WhatsApp channel is WhatsApp Web (Baileys, plugin
// @openclaw/whatsapp): no token, the gateway links the account as a "linked device" through its
// QR login flow, which the platform drives over the control protocol:
//   web.login.start {channel: "whatsapp"} → {qrDataUrl (PNG data URL), message} once WhatsApp's
//     servers handed out a QR, or {message} when they could not be reached;
//   web.login.wait {channel, currentQrDataUrl} → {connected, message, qrDataUrl when refreshed}
//     after the owner scanned it (WhatsApp → Linked devices), or "still waiting";
//   channels.status → channels.whatsapp {configured, linked, connected, self.e164…}.
// The credentials stay in the gateway's state volume. docs/decisions/0085-chat-channel-plugins.md

const CHANNEL = "whatsapp";
/** How long the gateway waits for WhatsApp to hand out a QR (OpenClaw's minimum is 5 s). */
const QR_TIMEOUT_MS = 20_000;
const WAIT_DEFAULT_MS = 25_000;
const WAIT_MAX_MS = 55_000;

export interface WhatsAppStatus {
  /** The channel is enabled in the gateway (chatapp3 provisioned, the plugin loaded). */
  configured: boolean;
  /** The gateway holds WhatsApp Web credentials for the account. */
  linked: boolean;
  connected: boolean;
  /** The linked phone number (E.164) when WhatsApp told it. */
  account: string | null;
  /** OpenClaw's status words, e.g. "not-linked", "linked". */
  state: string | null;
  lastError: string | null;
}

export interface WhatsAppLink {
  linked: boolean;
  /** A PNG data URL of the QR to scan, while one is active. */
  qrDataUrl: string | null;
  message: string;
}

interface ChannelsStatus {
  channels?: Record<
    string,
    {
      configured?: boolean;
      linked?: boolean;
      connected?: boolean;
      statusState?: string;
      lastError?: string | null;
      self?: { e164?: string | null; jid?: string | null };
    }
  >;
}

interface LoginResult {
  qrDataUrl?: string;
  connected?: boolean;
  message?: string;
  code?: string;
}

async function statusOf(client: GatewayClient): Promise<WhatsAppStatus> {
  const status = await client.request<ChannelsStatus>("channels.status", {});
  const wa = status.channels?.[CHANNEL];
  return {
    configured: wa?.configured === true,
    linked: wa?.linked === true,
    connected: wa?.connected === true,
    account: wa?.self?.e164 ?? wa?.self?.jid ?? null,
    state: wa?.statusState ?? null,
    lastError: wa?.lastError ?? null,
  };
}

async function requireChannel(userId: string): Promise<void> {
  if (!(await channelCredentialFlags(userId)).chatapp3) {
    throw new DomainError(
      400,
      "WhatsApp (chatapp3) is not set up: add it first (POST /api/provision with chatapp3Token, or set-credential chatapp3)",
    );
  }
}

/** The WhatsApp channel's state in the user's gateway. */
export async function whatsappStatus(userId: string): Promise<WhatsAppStatus> {
  return withGateway(userId, statusOf);
}

const isDataUrl = (value: unknown): value is string =>
  typeof value === "string" && value.startsWith("data:image/png;base64,");

/**
 * Starts linking: the QR to scan as a data URL. Already linked → `linked: true` and no QR.
 * WhatsApp's servers out of reach (or refusing) → 502 naming WhatsApp, with the gateway's words.
 */
export async function startWhatsAppLink(
  userId: string,
  options: { force?: boolean } = {},
): Promise<WhatsAppLink> {
  await requireChannel(userId);
  return withGateway(userId, async (client) => {
    const before = await statusOf(client);
    if (!before.configured) {
      throw new DomainError(502, "WhatsApp is not enabled in the agent's gateway yet");
    }
    if (before.linked && !options.force) {
      return { linked: true, qrDataUrl: null, message: "WhatsApp is already linked" };
    }
    const result = await client.request<LoginResult>(
      "web.login.start",
      { channel: CHANNEL, timeoutMs: QR_TIMEOUT_MS, ...(options.force ? { force: true } : {}) },
      { timeoutMs: QR_TIMEOUT_MS + 25_000 },
    );
    if (isDataUrl(result.qrDataUrl)) {
      return { linked: false, qrDataUrl: result.qrDataUrl, message: result.message ?? "" };
    }
    if (result.connected || (await statusOf(client)).linked) {
      return { linked: true, qrDataUrl: null, message: result.message ?? "WhatsApp is linked" };
    }
    throw new DomainError(
      502,
      `WhatsApp linking failed: ${result.message ?? "the gateway returned no QR"}`,
    );
  });
}

/**
 * Waits (up to `timeoutMs`) for the owner to scan the QR: linked, a refreshed QR (WhatsApp
 * rotates it), or still waiting. A login that failed on WhatsApp's side → 502.
 */
export async function waitWhatsAppLink(
  userId: string,
  options: { currentQrDataUrl?: string; timeoutMs?: number } = {},
): Promise<WhatsAppLink> {
  await requireChannel(userId);
  const timeoutMs = Math.min(Math.max(options.timeoutMs ?? WAIT_DEFAULT_MS, 1_000), WAIT_MAX_MS);
  return withGateway(userId, async (client) => {
    const result = await client.request<LoginResult>(
      "web.login.wait",
      {
        channel: CHANNEL,
        timeoutMs,
        ...(isDataUrl(options.currentQrDataUrl)
          ? { currentQrDataUrl: options.currentQrDataUrl }
          : {}),
      },
      { timeoutMs: timeoutMs + 15_000 },
    );
    const message = result.message ?? "";
    if (result.connected) return { linked: true, qrDataUrl: null, message };
    if (/^WhatsApp login failed|^Login ended without a connection/.test(message)) {
      throw new DomainError(502, `WhatsApp linking failed: ${message}`);
    }
    const qrDataUrl = isDataUrl(result.qrDataUrl)
      ? result.qrDataUrl
      : (options.currentQrDataUrl ?? null);
    // "No active login" / "QR expired": the QR shown is dead; the caller starts again.
    const active = !/No active WhatsApp login|expired/i.test(message);
    return { linked: false, qrDataUrl: active ? qrDataUrl : null, message };
  });
}
