import { delay, HttpResponse } from "msw";

// State shared by the AI-provider fakes (one handler file per provider next to this one): what
// each fake lists, answers and fails with, and the requests it received.

export type Outcome = number | "network" | "hang";

export interface FakeProviderState {
  apiKey: string;
  /** Model ids the listing returns. */
  models: string[];
  reply: string;
  /** When set, the reply to each request, from its body (replaces `reply`). */
  replyFor?: (body: Record<string, unknown>) => string;
  /** The usage the provider reports; null: it reports none. */
  usage: { prompt: number; completion: number } | null;
  /** When set, the usage reported for each request, from its body (replaces `usage`). */
  usageFor?: (body: Record<string, unknown>) => { prompt: number; completion: number };
  /** Outcomes of the next chat calls, consumed in order (a status, a network error, a hang). */
  failures: Outcome[];
  /** The listing answers normally, with an error status, with invalid JSON or not at all. */
  listing: "ok" | "invalid" | "network" | number;
  calls: Array<{ url: string; headers: Headers; body: unknown }>;
  /** When set, chat calls wait for it before answering. */
  gate?: Promise<void>;
  /**
   * When set, a streamed answer sends its first event and stays open until the platform's call
   * is aborted, which it records here (a client gone mid-stream must cut the upstream call).
   */
  openStream?: { aborted: boolean };
}

export function fakeState(overrides: Partial<FakeProviderState> = {}): FakeProviderState {
  return {
    apiKey: "test-key",
    models: [],
    reply: "Hello from the fake provider.",
    usage: { prompt: 12, completion: 7 },
    failures: [],
    listing: "ok",
    calls: [],
    ...overrides,
  };
}

/** Answers a failure outcome, or undefined when the call should succeed. */
export async function failure(
  state: FakeProviderState,
  errorBody: (status: number) => unknown,
): Promise<Response | undefined> {
  const next = state.failures.shift();
  if (next === undefined) return undefined;
  if (next === "network") return HttpResponse.error();
  if (next === "hang") {
    await delay("infinite");
    return HttpResponse.error();
  }
  return HttpResponse.json(errorBody(next) as object, { status: next });
}

export async function listingFailure(state: FakeProviderState): Promise<Response | undefined> {
  if (state.listing === "ok") return undefined;
  if (state.listing === "network") return HttpResponse.error();
  if (state.listing === "invalid") {
    return new HttpResponse("<html>Bad gateway</html>", {
      status: 200,
      headers: { "content-type": "text/html" },
    });
  }
  return HttpResponse.json({ error: { message: "listing failed" } }, { status: state.listing });
}

/** A text/event-stream body from ready-made SSE blocks, one chunk per block. */
export function sseResponse(
  blocks: string[],
  open?: { request: Request; record: { aborted: boolean } },
): Response {
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      if (open) {
        // The first event only; the stream ends when the caller aborts its request.
        controller.enqueue(encoder.encode(blocks[0] ?? ""));
        open.request.signal.addEventListener("abort", () => {
          open.record.aborted = true;
          controller.close();
        });
        return;
      }
      for (const block of blocks) controller.enqueue(encoder.encode(block));
      controller.close();
    },
    cancel() {
      if (open) open.record.aborted = true;
    },
  });
  return new HttpResponse(stream, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
  });
}

/** Splits a reply into a few streamed pieces. */
export function pieces(text: string): string[] {
  const words = text.split(/(?<= )/);
  return words.length > 0 ? words : [text];
}
