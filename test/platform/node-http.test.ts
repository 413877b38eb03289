import { once } from "node:events";
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { preReadBody, toRequest } from "../../app/server/platform/web/node-http.server.ts";

// The server entry's Request: its signal is the server's own (not followed by undici's Request
// through a WeakRef, decision 0088), so it must still abort when the client goes away, for
// clones too, and never after a finished answer.

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer(handler);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, url };
}

describe("toRequest", () => {
  it("gives a Request with the method, URL, headers and pre-read body", async () => {
    let seen: Request | undefined;
    const { server, url } = await serve((req, res) => {
      seen = toRequest(req, res, "http://example.test", Buffer.from('{"a":1}'));
      res.end("ok");
    });
    const res = await fetch(`${url}/api/x?q=1`, {
      method: "POST",
      headers: { "x-one": "1", "content-type": "application/json" },
      body: '{"a":1}',
    });
    await res.text();
    server.close();
    expect(seen).toBeInstanceOf(Request);
    expect(seen?.method).toBe("POST");
    expect(seen?.url).toBe("http://example.test/api/x?q=1");
    expect(seen?.headers.get("x-one")).toBe("1");
    expect(preReadBody(seen!)?.toString()).toBe('{"a":1}');
    expect(await seen?.json()).toEqual({ a: 1 });
    expect(seen?.signal.aborted).toBe(false); // a finished answer never aborts
  });

  it("aborts request.signal, and a clone's, when the client goes away mid-answer", async () => {
    let resolveRequest!: (r: Request) => void;
    const made = new Promise<Request>((r) => {
      resolveRequest = r;
    });
    const { server, url } = await serve((req, res) => {
      resolveRequest(toRequest(req, res, "http://example.test"));
      res.write("partial"); // never ended
    });
    const client = request(url);
    client.on("error", () => {});
    client.end();
    const incoming = await made;
    const clone = incoming.clone();
    expect(incoming.signal.aborted).toBe(false);
    const aborted = once(incoming.signal, "abort");
    client.destroy();
    await aborted;
    expect(clone.signal.aborted).toBe(true);
    server.closeAllConnections();
    server.close();
  });
});
