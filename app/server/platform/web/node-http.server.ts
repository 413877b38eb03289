import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { Answer, PlainAnswer } from "../http.server.ts";
import { declaredLength } from "./request-body.server.ts";

// The Node <-> Fetch bridge of the server entry: small and allocation-light on purpose, since
// it runs for every request.

// Side channels of the /api fast path (docs/decisions/0026): a request body the server entry
// has already read into memory, and a response body known as a string. The Request and Response
// still carry the same body for every other reader; these only spare the hot path the Web-stream
// round trips (Readable.toWeb, getReader, TextEncoder) on both ends.
// The server entry (server.ts, run from source) and the routes (bundled into build/index.js)
// each load their own copy of this module, so the tables live on globalThis, shared by both.
interface SideTables {
  preRead: WeakMap<Request, Buffer>;
  rawBodies: WeakMap<Response, string>;
  directSources: WeakMap<ReadableStream, AsyncIterator<Uint8Array>>;
}
const TABLES = Symbol.for("agent-platform.node-http.side-tables");
const shared = globalThis as { [TABLES]?: SideTables };
shared[TABLES] ??= {
  preRead: new WeakMap(),
  rawBodies: new WeakMap(),
  directSources: new WeakMap(),
};
const { preRead, rawBodies, directSources } = shared[TABLES];

/**
 * Registers the iterator a ReadableStream is made from: the server entry then pulls the chunks
 * from it directly (no reader, no stream queue) when it sends that stream as a response body.
 * The stream must only pull on demand (high-water mark 0), so that nothing is read twice.
 */
export function withDirectSource<S extends ReadableStream>(
  stream: S,
  source: AsyncIterator<Uint8Array>,
): S {
  directSources.set(stream, source);
  return stream;
}

/** The body the server entry read before building `request` (undefined: read the stream). */
export const preReadBody = (request: Request): Buffer | undefined =>
  request.bodyUsed ? undefined : preRead.get(request);

/** Marks `response`'s body as exactly `body`, so the server entry can send it in one write. */
export function withRawBody(response: Response, body: string): Response {
  rawBodies.set(response, body);
  return response;
}

/**
 * Reads a request body of a declared length up to `max` bytes into memory (API requests carry
 * small JSON bodies); undefined when it should be streamed instead (no or a larger length).
 */
export function readSmallBody(req: IncomingMessage, max: number): Promise<Buffer> | undefined {
  if (req.method === "GET" || req.method === "HEAD") return undefined; // no body by definition
  const length = declaredLength(req);
  if (length === undefined || length > max) return undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.once("end", () => {
      ended = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
    req.once("error", reject);
    // A client that goes away mid-body: nothing to answer. (`close` also follows every normal
    // end: no Error, and its stack trace, is made then.)
    req.once("close", () => {
      if (!ended) reject(new Error("client closed the request"));
    });
  });
}

/**
 * A Request whose `signal` is the server's own controller's, aborted when the client goes away
 * mid-response. Handing undici's Request a `signal` in its init instead makes it follow that
 * signal through a WeakRef and a FinalizationRegistry entry per request, and V8's scavenger
 * treats both as strong: every request's two controllers, its listener and the registry entry
 * were promoted to the old generation and only freed by a full GC (a third of what the hot path
 * promoted; docs/decisions/0088). `clone()` keeps the same signal.
 */
class NodeRequest extends Request {
  readonly #signal: AbortSignal;

  constructor(input: URL | Request, init: RequestInit | undefined, signal: AbortSignal) {
    super(input, init);
    this.#signal = signal;
  }

  // lib.dom declares `signal` a property, so the accessor is installed on the prototype here.
  static {
    // biome-ignore lint/complexity/noThisInStatic: the bundler makes the class an expression whose name is not bound yet when this block runs
    Object.defineProperty(this.prototype, "signal", {
      get(this: NodeRequest) {
        return this.#signal;
      },
    });
  }

  override clone(): Request {
    return new NodeRequest(super.clone(), undefined, this.#signal);
  }
}

/**
 * `body`: the bytes already read, or the (capped) stream to read them from; without one the
 * request's own stream. `controller` aborts the Request's signal (the server's, when it has
 * answered for the route).
 */
export function toRequest(
  req: IncomingMessage,
  res: ServerResponse,
  origin: string,
  body?: Buffer | ReadableStream<Uint8Array>,
  controller = new AbortController(),
): Request {
  // Abort only when the client went away mid-response (a DOMException per request is costly).
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  const method = req.method ?? "GET";
  const init: RequestInit & { duplex?: "half" } = { method, headers };
  if (Buffer.isBuffer(body)) {
    init.body = body as Uint8Array<ArrayBuffer>;
  } else if (method !== "GET" && method !== "HEAD") {
    init.body = body ?? (Readable.toWeb(req) as ReadableStream<Uint8Array>);
    init.duplex = "half";
  }
  const request = new NodeRequest(new URL(req.url ?? "/", origin), init, controller.signal);
  if (Buffer.isBuffer(body)) preRead.set(request, body);
  return request;
}

/**
 * Writes `response` to `res`. `defaults` (the server's constant headers, built once) go out with
 * every answer unless the response sets the same header itself.
 */
export async function sendResponse(
  res: ServerResponse,
  response: Answer,
  head: boolean,
  defaults?: Readonly<Record<string, string>>,
) {
  if (!(response instanceof Response)) {
    sendPlain(res, response, head, defaults);
    return;
  }
  const headers: Record<string, string | string[]> = { ...defaults };
  response.headers.forEach((value, key) => {
    if (key !== "set-cookie") headers[key] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers["set-cookie"] = cookies;
  if (head || !response.body) {
    res.writeHead(response.status, response.statusText || undefined, headers);
    res.end();
    return;
  }
  const raw = response.bodyUsed ? undefined : rawBodies.get(response);
  if (raw !== undefined) {
    // Headers and body in one write; the Response's own stream is never touched.
    headers["content-length"] = String(Buffer.byteLength(raw));
    res.writeHead(response.status, response.statusText || undefined, headers);
    res.end(raw);
    return;
  }
  const source = response.body.locked ? undefined : directSources.get(response.body);
  if (source) {
    directSources.delete(response.body);
    await sendDirect(res, response.status, response.statusText, headers, source);
    return;
  }
  const reader = response.body.getReader();
  // Server-sent events: headers at once and every event as it comes (no waiting for a second
  // chunk), and a client that goes away cancels the stream (and so the upstream call).
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
    res.writeHead(response.status, response.statusText || undefined, headers);
    res.flushHeaders();
    const onClose = () => {
      if (!res.writableFinished) reader.cancel().catch(() => {});
    };
    res.once("close", onClose);
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || res.destroyed) break;
        if (!res.write(value)) {
          await new Promise<void>((resolve) => {
            res.once("drain", resolve);
            res.once("close", resolve);
          });
        }
      }
    } catch {
      // The stream failed mid-way: end the response; the producer has logged why.
    } finally {
      res.off("close", onClose);
      reader.releaseLock();
      res.end();
    }
    return;
  }
  try {
    // Most API bodies arrive in one chunk: send those with a Content-Length in a single write.
    const first = await reader.read();
    const second = first.done ? first : await reader.read();
    if (second.done) {
      if (first.value) headers["content-length"] = String(first.value.byteLength);
      res.writeHead(response.status, response.statusText || undefined, headers);
      res.end(first.value);
      return;
    }
    res.writeHead(response.status, response.statusText || undefined, headers);
    res.write(first.value);
    res.write(second.value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) {
        await new Promise<void>((resolve) => {
          res.once("drain", resolve);
          res.once("close", resolve);
        });
      }
      if (res.destroyed) break;
    }
  } finally {
    reader.releaseLock();
    res.end();
  }
}

/** A plain answer: its headers over the defaults, and the body, in one write. */
function sendPlain(
  res: ServerResponse,
  answer: PlainAnswer,
  head: boolean,
  defaults?: Readonly<Record<string, string>>,
) {
  const headers: Record<string, string | string[]> = { ...defaults, ...answer.headers };
  if (answer.setCookie) headers["set-cookie"] = [answer.setCookie];
  if (head) {
    res.writeHead(answer.status, headers);
    res.end();
    return;
  }
  headers["content-length"] = String(Buffer.byteLength(answer.body));
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}

const drained = (res: ServerResponse) =>
  new Promise<void>((resolve) => {
    res.once("drain", resolve);
    res.once("close", resolve);
  });

/**
 * Streams a registered source to the socket: each chunk written as it comes. The headers go out
 * with the first chunk when it is already there, else at once on their own (a client sees the
 * answer has started while the model thinks). A client that goes away ends the source (and so
 * the upstream call).
 */
async function sendDirect(
  res: ServerResponse,
  status: number,
  statusText: string,
  headers: Record<string, string | string[]>,
  source: AsyncIterator<Uint8Array>,
) {
  res.writeHead(status, statusText || undefined, headers);
  let finished = false;
  const onClose = () => {
    if (!finished) source.return?.().catch(() => {});
  };
  res.once("close", onClose);
  // Chunks that are already there when one is written (several provider events read at once)
  // leave in the same write: corked until the pending callbacks of this turn have run.
  let corked = false;
  const uncork = () => {
    corked = false;
    res.uncork();
  };
  try {
    let next = source.next();
    const first = await Promise.race([
      next,
      new Promise<undefined>((r) => setImmediate(() => r(undefined))),
    ]);
    if (first === undefined) res.flushHeaders();
    for (;;) {
      const { done, value } = await next;
      if (done || res.destroyed) break;
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(uncork);
      }
      if (!res.write(value)) await drained(res);
      if (res.destroyed) break;
      next = source.next();
    }
    finished = true;
  } catch {
    // The source failed mid-way: end the response; the producer has logged why.
  } finally {
    res.off("close", onClose);
    res.end();
  }
}
