import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";

// The Node <-> Fetch bridge of the server entry: small and allocation-light on purpose, since
// it runs for every request.

export function toRequest(req: IncomingMessage, res: ServerResponse, origin: string): Request {
  const controller = new AbortController();
  // Abort only when the client went away mid-response (a DOMException per request is costly).
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  const method = req.method ?? "GET";
  const init: RequestInit & { duplex?: "half" } = { method, headers, signal: controller.signal };
  if (method !== "GET" && method !== "HEAD") {
    init.body = Readable.toWeb(req) as ReadableStream<Uint8Array>;
    init.duplex = "half";
  }
  return new Request(new URL(req.url ?? "/", origin), init);
}

export async function sendResponse(res: ServerResponse, response: Response, head: boolean) {
  const headers: Record<string, string | string[]> = {};
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
