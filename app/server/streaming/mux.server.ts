import { fetchWithTimeout, jsonOf, ServiceUnavailable } from "../channels/http.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";

// Mux Video live streams, the streaming provider of the agents' live streams. Basic auth with
// an access token id and secret. https://docs.mux.com/api-reference#video/operation/create-live-stream

export const RTMP_SERVER = "rtmps://global-live.mux.com:443/app";
export const playbackUrlOf = (playbackId: string) => `https://stream.mux.com/${playbackId}.m3u8`;
/** Where a player fetches the playlist, its renditions and segments (CSP source expressions). */
export const MEDIA_SOURCES = ["https://*.mux.com"] as const;

export interface LiveStream {
  id: string;
  streamKey: string;
  playbackId: string;
  latencyMode: string;
}

function credentials(): string {
  const { MUX_TOKEN_ID, MUX_TOKEN_SECRET } = env();
  if (!MUX_TOKEN_ID || !MUX_TOKEN_SECRET) {
    throw new DomainError(503, "Live streaming is not configured (MUX_TOKEN_ID, MUX_TOKEN_SECRET)");
  }
  return `Basic ${Buffer.from(`${MUX_TOKEN_ID}:${MUX_TOKEN_SECRET}`).toString("base64")}`;
}

/** Throws 503 unless the provider is configured (checked before anything is created). */
export function requireMuxConfigured(): void {
  credentials();
}

const base = () => env().MUX_API_URL.replace(/\/$/, "");

export async function createLiveStream(passthrough: string): Promise<LiveStream> {
  const response = await fetchWithTimeout("Mux", `${base()}/video/v1/live_streams`, {
    method: "POST",
    headers: { Authorization: credentials(), "Content-Type": "application/json" },
    body: JSON.stringify({
      playback_policy: ["public"],
      new_asset_settings: { playback_policy: ["public"] },
      latency_mode: "low",
      reconnect_window: 60,
      passthrough,
    }),
  });
  const body = await jsonOf<{
    data?: {
      id?: string;
      stream_key?: string;
      playback_ids?: Array<{ id: string; policy: string }>;
      latency_mode?: string;
    };
    error?: { type?: string; messages?: string[] };
  }>("Mux", response);
  if (response.status === 401 || response.status === 403) {
    // Our own credentials are wrong: the provider is unusable, not the client's fault.
    throw new ServiceUnavailable(`Mux refused the platform's credentials (${response.status})`);
  }
  const data = body.data;
  const playbackId = data?.playback_ids?.find((p) => p.policy === "public")?.id;
  if (!response.ok || !data?.id || !data.stream_key || !playbackId) {
    throw new ServiceUnavailable(
      `Mux answered ${response.status}: ${body.error?.messages?.join("; ") ?? "no live stream"}`,
    );
  }
  return {
    id: data.id,
    streamKey: data.stream_key,
    playbackId,
    latencyMode: data.latency_mode ?? "low",
  };
}

/** Deletes a live stream (undoing a provisioning that failed later); 404 counts as done. */
export async function deleteLiveStream(id: string): Promise<void> {
  const response = await fetchWithTimeout(
    "Mux",
    `${base()}/video/v1/live_streams/${encodeURIComponent(id)}`,
    { method: "DELETE", headers: { Authorization: credentials() } },
  );
  if (!response.ok && response.status !== 404) {
    throw new ServiceUnavailable(`Mux answered ${response.status} to the delete`);
  }
}
