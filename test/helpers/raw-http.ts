import { connect, type Socket } from "node:net";

// An HTTP/1.1 client on a bare socket, for tests about how a server reads request bodies: it
// writes exactly the bytes it is given (chunked framing included), counts what it wrote before
// the answer came, and can send headers that announce a body it never sends.

export interface RawAnswer {
  status: number;
  /** Response headers, lower-case names. */
  headers: Record<string, string>;
  body: string;
  /** Body bytes the client had written when the first byte of the answer arrived. */
  writtenBeforeAnswer: number;
  /** Body bytes the client wrote in all (it stops when the server closes or answers). */
  written: number;
  /** What `probe` gave when the first byte of the answer arrived. */
  probedAtAnswer: number;
}

export interface RawRequest {
  port: number;
  method?: string;
  path: string;
  headers?: Record<string, string>;
  /**
   * The body: sent chunked, chunk by chunk, waiting for the socket to drain, until the answer
   * comes or the source ends. Omit it with a `content-length` header to announce a body and
   * send none.
   */
  chunks?: AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
  /** Or a body sent whole after the headers (give its `content-length`). */
  body?: Uint8Array;
  /** Read when the answer starts (e.g. the bytes the server's socket has read). */
  probe?: () => number;
}

/**
 * A body without end, in `chunkBytes` pieces: bounded only by `stopAfter` bytes, so that a
 * server that reads it whole still answers in the end (and the test can see how much it read).
 */
export function* endlessBody(stopAfter: number, chunkBytes = 64 * 1024): Generator<Uint8Array> {
  const chunk = Buffer.alloc(chunkBytes, "a");
  for (let sent = 0; sent < stopAfter; sent += chunkBytes) yield chunk;
}

/** Sends one request on a fresh connection and reads the answer until the server closes it. */
export async function rawRequest(req: RawRequest): Promise<RawAnswer> {
  const socket: Socket = connect(req.port, "127.0.0.1");
  socket.on("error", () => {}); // a server that closes mid-body: EPIPE / ECONNRESET on write
  const received: Buffer[] = [];
  let written = 0;
  let writtenBeforeAnswer = -1;
  let probedAtAnswer = -1;
  let closed = false;
  const done = new Promise<void>((resolve) => {
    socket.on("data", (data: Buffer) => {
      if (writtenBeforeAnswer < 0) {
        writtenBeforeAnswer = written;
        probedAtAnswer = req.probe?.() ?? -1;
      }
      received.push(data);
    });
    socket.once("close", () => {
      closed = true;
      resolve();
    });
  });
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  const headers: Record<string, string> = {
    host: `127.0.0.1:${req.port}`,
    // The answer is read to the end of the connection.
    connection: "close",
    ...req.headers,
  };
  if (req.chunks) headers["transfer-encoding"] = "chunked";
  const head = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  socket.write(`${req.method ?? "POST"} ${req.path} HTTP/1.1\r\n${head}\r\n`);
  if (req.body) socket.write(req.body);
  if (req.chunks) {
    const write = async (data: string | Uint8Array) => {
      if (socket.destroyed) return; // closed by the server: nothing more goes out
      if (!socket.write(data) && !socket.destroyed) {
        await new Promise<void>((resolve) => {
          socket.once("drain", resolve);
          socket.once("close", resolve);
        });
      }
    };
    for await (const chunk of req.chunks) {
      if (closed || writtenBeforeAnswer >= 0 || socket.destroyed) break;
      await write(`${chunk.byteLength.toString(16)}\r\n`);
      await write(chunk);
      await write("\r\n");
      written += chunk.byteLength;
    }
    if (!closed && writtenBeforeAnswer < 0 && !socket.destroyed) await write("0\r\n\r\n");
  }
  await done;
  return { ...parse(Buffer.concat(received)), writtenBeforeAnswer, written, probedAtAnswer };
}

function parse(raw: Buffer): Pick<RawAnswer, "status" | "headers" | "body"> {
  const end = raw.indexOf("\r\n\r\n");
  if (end < 0) throw new Error(`no HTTP answer: ${JSON.stringify(raw.toString("latin1"))}`);
  const [statusLine, ...lines] = raw.subarray(0, end).toString("latin1").split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = raw.subarray(end + 4);
  if (headers["transfer-encoding"] === "chunked") body = unchunk(body);
  return { status: Number(statusLine!.split(" ")[1]), headers, body: body.toString("utf8") };
}

function unchunk(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf("\r\n", at);
    if (lineEnd < 0) break;
    const size = Number.parseInt(data.subarray(at, lineEnd).toString("latin1"), 16);
    if (!size) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
