import { randomBytes } from "node:crypto";
import { HttpResponse, http } from "msw";

// Mux Video live streams (https://docs.mux.com/api-reference#video/tag/live-streams): POST
// /video/v1/live_streams answers 201 {data: live stream} with Basic auth of the access token,
// 401 {error: {type: "unauthorized", messages: [...]}} otherwise; DELETE answers 204.
// `state.down` answers 500 like Mux during an outage.

export const MUX_BASE = "https://api.mux.com";

export interface FakeStream {
  id: string;
  stream_key: string;
  playback_ids: Array<{ id: string; policy: string }>;
  passthrough?: string;
}

export function createMuxFake(base = MUX_BASE, tokenId = "mux-token-id", secret = "mux-secret") {
  const state = {
    down: false,
    streams: new Map<string, FakeStream>(),
    created: 0,
    deleted: [] as string[],
  };
  const authorized = (request: Request) =>
    request.headers.get("authorization") ===
    `Basic ${Buffer.from(`${tokenId}:${secret}`).toString("base64")}`;
  const unauthorized = () =>
    HttpResponse.json(
      { error: { type: "unauthorized", messages: ["Unauthorized request"] } },
      { status: 401 },
    );
  const handlers = [
    http.post(`${base}/video/v1/live_streams`, async ({ request }) => {
      if (state.down) {
        return HttpResponse.json(
          { error: { type: "internal_error", messages: ["Internal server error"] } },
          { status: 500 },
        );
      }
      if (!authorized(request)) return unauthorized();
      const body = (await request.json()) as {
        playback_policy?: string[];
        latency_mode?: string;
        reconnect_window?: number;
        passthrough?: string;
      };
      const id = randomBytes(16).toString("base64url").replace(/[-_]/g, "x");
      const stream = {
        id,
        stream_key: randomBytes(18).toString("hex"),
        playback_ids: [
          { id: randomBytes(16).toString("base64url").replace(/[-_]/g, "y"), policy: "public" },
        ],
        ...(body.passthrough ? { passthrough: body.passthrough } : {}),
      };
      state.streams.set(id, stream);
      state.created += 1;
      return HttpResponse.json(
        {
          data: {
            ...stream,
            status: "idle",
            reconnect_window: body.reconnect_window ?? 60,
            new_asset_settings: { playback_policies: body.playback_policy ?? ["public"] },
            latency_mode: body.latency_mode ?? "standard",
            max_continuous_duration: 43200,
            created_at: String(Math.floor(Date.now() / 1000)),
            test: false,
          },
        },
        { status: 201 },
      );
    }),
    http.delete(`${base}/video/v1/live_streams/:id`, ({ request, params }) => {
      if (!authorized(request)) return unauthorized();
      const id = String(params.id);
      if (!state.streams.delete(id)) {
        return HttpResponse.json(
          { error: { type: "not_found", messages: ["Live stream not found"] } },
          { status: 404 },
        );
      }
      state.deleted.push(id);
      return new HttpResponse(null, { status: 204 });
    }),
  ];
  return { state, handlers };
}
