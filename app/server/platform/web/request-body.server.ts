import type { IncomingMessage } from "node:http";

// Request bodies are capped while they stream, before anything parses them (issue 47, finding 3;
// docs/decisions/0197): a declared length above the cap is refused unread, and a chunked body is
// counted chunk by chunk and cut off as soon as it passes the cap. The web server applies it to
// every route and page action; routes that take more declare their own cap (`maxBodyBytes`).

const MiB = 1024 * 1024;
const KiB = 1024;

/** "1 MiB", "64 KiB" or "1000 bytes": how a cap is named in a 413's message. */
export function describeBytes(bytes: number): string {
  if (bytes >= MiB && bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes >= KiB && bytes % KiB === 0) return `${bytes / KiB} KiB`;
  return `${bytes} bytes`;
}

export const tooLargeMessage = (cap: number) => `Request body exceeds ${describeBytes(cap)}`;

// The server entry (run from source) and the routes (bundled) each load their own copy of this
// module, so the error is recognised by a registered symbol, not by its class.
const TOO_LARGE = Symbol.for("agent-platform.body-too-large");

/** The error a capped body's stream fails with once it passes its cap. */
export function bodyTooLarge(cap: number): Error {
  return Object.assign(new Error(tooLargeMessage(cap)), { [TOO_LARGE]: cap });
}

/** The cap a body-too-large error names; undefined for any other error. */
export function tooLargeCap(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null || !(TOO_LARGE in error)) return undefined;
  const cap = (error as { [TOO_LARGE]: unknown })[TOO_LARGE];
  return typeof cap === "number" ? cap : undefined;
}

/** The body length a request declares (Content-Length without chunking); undefined if none. */
export function declaredLength(req: IncomingMessage): number | undefined {
  const declared = req.headers["content-length"];
  if (declared === undefined || req.headers["transfer-encoding"] !== undefined) return undefined;
  const length = Number(declared);
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

/** Whether a request carries a body at all (a length above zero, or a chunked one). */
export const hasBody = (req: IncomingMessage): boolean =>
  req.headers["transfer-encoding"] !== undefined || (declaredLength(req) ?? 0) > 0;

/** How much of a body is held while its reader has not asked for more. */
const QUEUE_BYTES = 64 * 1024;

/**
 * `req`'s body as a Web stream that holds at most QUEUE_BYTES ahead of its reader (the socket is
 * paused meanwhile) and fails with `bodyTooLarge(cap)` once more than `cap` bytes came, after
 * calling `onOver` (which answers 413): the rest is never read.
 */
export function cappedBody(
  req: IncomingMessage,
  cap: number,
  onOver: () => void,
): ReadableStream<Uint8Array> {
  let seen = 0;
  let settled = false;
  let stream!: ReadableStreamDefaultController<Uint8Array>;
  const stop = () => {
    settled = true;
    req.off("data", onData);
    req.pause();
  };
  const onData = (chunk: Buffer) => {
    seen += chunk.byteLength;
    if (seen > cap) {
      stop();
      onOver();
      stream.error(bodyTooLarge(cap));
      return;
    }
    stream.enqueue(chunk);
    if ((stream.desiredSize ?? 0) <= 0) req.pause();
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        stream = controller;
        req.on("data", onData);
        req.once("end", () => {
          if (settled) return;
          settled = true;
          controller.close();
        });
        req.once("error", (error) => {
          if (settled) return;
          stop();
          controller.error(error);
        });
        // A client that goes away mid-body: the reader must not wait for the rest.
        req.once("close", () => {
          if (settled || req.complete) return;
          stop();
          controller.error(new Error("client closed the request"));
        });
      },
      pull() {
        if (!settled) req.resume();
      },
      cancel() {
        // The reader wants no more: stop reading (the server closes the connection after the
        // answer, since the body was not read to its end).
        stop();
      },
    },
    { highWaterMark: QUEUE_BYTES, size: (chunk) => chunk.byteLength },
  );
}
