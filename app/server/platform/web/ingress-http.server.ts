import {
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from "node:http";
import { Transform, type TransformCallback } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import {
  answerHeaders,
  DROP_REQUEST,
  DROP_RESPONSE,
  forwardHeaders,
  proxyHeaders,
  splitAddress,
} from "./ingress-headers.server.ts";
import type { IngressContext } from "./ingress-types.server.ts";

// The ingress's HTTP half: a request admitted by the authority is piped to the gateway (body
// limit, response timeout, idle timeout), its answer piped back, or read whole and rewritten
// when the authority rewrites pages (the path form's base path).

/** How a page to rewrite may come (navigations ask for identity; anything else may not). */
const DECODERS: Record<string, (() => Transform) | "none"> = {
  identity: "none",
  gzip: () => createGunzip(),
  "x-gzip": () => createGunzip(),
  deflate: () => createInflate(),
  br: () => createBrotliDecompress(),
};

/** A browser navigation (it asks for HTML): its answer is read as text to be rewritten. */
const isNavigation = (req: IncomingMessage) => /\btext\/html\b/i.test(req.headers.accept ?? "");

/**
 * Reads an answer's body as text (at most `limit` bytes, decompressed when it came compressed)
 * and rewrites it.
 */
async function rewritten(
  answerIn: IncomingMessage,
  rewrite: (html: string) => string,
  limit: number,
): Promise<string> {
  const encoding = String(answerIn.headers["content-encoding"] ?? "identity").toLowerCase();
  const decode = DECODERS[encoding];
  if (!decode) {
    answerIn.destroy();
    throw new Error(`The agent's gateway sent a page in an unknown encoding (${encoding})`);
  }
  // The limit counts the page as rewritten: decompressed bytes.
  let body: AsyncIterable<Buffer> = answerIn;
  if (decode !== "none") {
    const decoder = decode();
    answerIn.on("error", (error) => decoder.destroy(error));
    body = answerIn.pipe(decoder);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      answerIn.destroy();
      throw new Error("The agent's gateway sent too large a page");
    }
    chunks.push(chunk);
  }
  return rewrite(Buffer.concat(chunks).toString("utf8"));
}

/** Counts bytes and fails past the limit (the request is then answered 413). */
class ByteLimit extends Transform {
  #seen = 0;
  readonly limit: number;
  constructor(limit: number) {
    super();
    this.limit = limit;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.#seen += chunk.length;
    if (this.#seen > this.limit) done(new BodyTooLarge());
    else done(null, chunk);
  }
}
class BodyTooLarge extends Error {}

export function answer(
  res: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  body = "",
) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const isJson = body.startsWith("{");
  res.writeHead(status, {
    "Content-Type": isJson ? "application/json" : "text/plain; charset=utf-8",
    "Cache-Control": "no-store",
    ...headers,
  });
  res.end(body);
}

/** One proxied HTTP request: admitted by the authority, then piped to the gateway and back. */
export async function proxyHttp(
  ctx: IngressContext,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const { authority, limits, acquire } = ctx;
  const verdict = await authority.admit(req, "http");
  if (verdict.kind === "answer") {
    answer(res, verdict.status, verdict.headers ?? {}, verdict.body);
    return;
  }
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limits.maxBodyBytes) {
    answer(res, 413, {}, JSON.stringify({ error: "Request body too large" }));
    return;
  }
  const release = acquire(verdict.agentKey, verdict.userKey);
  if (!release) {
    answer(res, 429, { "Retry-After": "5" }, JSON.stringify({ error: "Too many connections" }));
    return;
  }
  res.on("close", release);
  const [host, port] = splitAddress(verdict.address);
  const upstream = httpRequest({
    host,
    port,
    method: req.method,
    path: verdict.path,
    headers: {
      ...forwardHeaders(req.headers, DROP_REQUEST),
      ...proxyHeaders(req, verdict),
      // A page to rewrite is read as text: asked uncompressed by navigations (assets keep
      // the visitor's encodings; a page that comes compressed anyway is decompressed).
      ...(verdict.rewritePage && isNavigation(req) ? { "accept-encoding": "identity" } : {}),
    },
    timeout: limits.responseTimeoutMs,
  });
  const fail = (status: number, error: string) => {
    upstream.destroy();
    answer(res, status, verdict.responseHeaders ?? {}, JSON.stringify({ error }));
  };
  upstream.on("timeout", () => fail(504, "The agent's gateway did not answer in time"));
  upstream.on("error", (error) => {
    if (error instanceof BodyTooLarge) fail(413, "Request body too large");
    else if (!res.headersSent) fail(502, "The agent's gateway is not reachable");
    else res.destroy();
  });
  upstream.on("response", (answerIn) => {
    upstream.setTimeout(limits.idleMs); // streaming answers may be quiet, but not forever
    const rewrite = verdict.rewritePage;
    const html = /^text\/html\b/i.test(String(answerIn.headers["content-type"] ?? ""));
    if (rewrite && html && req.method === "HEAD") {
      // No page to rewrite: the headers, without a length the rewritten page would not have.
      const headers = forwardHeaders(answerIn.headers, DROP_RESPONSE);
      delete headers["content-length"];
      res.writeHead(answerIn.statusCode ?? 502, answerHeaders(headers, verdict.responseHeaders));
      res.end();
      answerIn.resume();
      return;
    }
    if (rewrite && html) {
      void rewritten(answerIn, rewrite, limits.maxPageBytes).then(
        (page) => {
          const headers = forwardHeaders(answerIn.headers, DROP_RESPONSE);
          delete headers["content-length"];
          delete headers["content-encoding"]; // sent as rewritten: plain text
          res.writeHead(answerIn.statusCode ?? 502, {
            ...answerHeaders(headers, verdict.responseHeaders),
            "content-length": Buffer.byteLength(page),
          });
          res.end(page);
        },
        (error: Error) => fail(502, error.message),
      );
      return;
    }
    res.writeHead(
      answerIn.statusCode ?? 502,
      answerHeaders(forwardHeaders(answerIn.headers, DROP_RESPONSE), verdict.responseHeaders),
    );
    answerIn.pipe(res);
    answerIn.on("error", () => res.destroy());
  });
  // The visitor went away: stop asking the gateway.
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
  const limit = new ByteLimit(limits.maxBodyBytes);
  limit.on("error", (error) => upstream.emit("error", error));
  req.pipe(limit).pipe(upstream);
}
