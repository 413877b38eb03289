import { Agent, createServer, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { gracefulStop } from "../../app/server/platform/web/graceful-stop.server.ts";

// Issue 52, finding 2: Ctrl-C waited the web's whole grace once a gateway had a kept-alive
// connection to it (an answer under way at the signal left its connection open after it ended),
// and the grace's timeout exited without settling the metering buffer.

const agents: Agent[] = [];
afterEach(() => {
  for (const agent of agents.splice(0)) agent.destroy();
});

/** A server whose answers wait until the test ends them; `arrived` resolves with each one. */
async function serverWithHeldAnswers() {
  const held: ServerResponse[] = [];
  let arrive: () => void = () => {};
  let arrived = new Promise<void>((resolve) => {
    arrive = resolve;
  });
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.write("part ");
    held.push(res);
    arrive();
  });
  server.keepAliveTimeout = 65_000; // as server.ts sets it
  const stop = gracefulStop(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(agent);
  const get = () =>
    new Promise<{ body: string; closed: Promise<void> }>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path: "/", agent }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        const socket = res.socket;
        const closed = new Promise<void>((done) => socket.once("close", () => done()));
        res.on("end", () => resolve({ body, closed }));
      });
      req.on("error", reject);
      req.end();
    });
  const nextArrival = async () => {
    await arrived;
    arrived = new Promise<void>((resolve) => {
      arrive = resolve;
    });
  };
  return { held, stop, get, nextArrival };
}

it("gives an answer under way its grace, then closes its kept-alive connection at once", async () => {
  const s = await serverWithHeldAnswers();
  const answered = s.get();
  await s.nextArrival();
  let flushed = 0;
  const t0 = Date.now();
  const stopped = s.stop({
    graceMs: 30_000,
    flush: async () => {
      flushed++;
    },
    flushTimeoutMs: 1_000,
  });
  s.held[0]?.end("done");
  const { body, closed } = await answered;
  expect(body).toBe("part done");
  await closed; // the client's kept-alive socket is closed by the server
  expect(await stopped).toBe("drained");
  expect(Date.now() - t0).toBeLessThan(5_000);
  expect(flushed).toBe(1);
});

it("settles the buffer when the grace expires too", async () => {
  const s = await serverWithHeldAnswers();
  void s.get().catch(() => {}); // never answered: cut when the grace expires
  await s.nextArrival();
  let flushed = 0;
  const outcome = await s.stop({
    graceMs: 50,
    flush: async () => {
      flushed++;
    },
    flushTimeoutMs: 1_000,
  });
  expect(outcome).toBe("grace expired");
  expect(flushed).toBe(1);
});

it("does not let a flush that hangs hold the exit", async () => {
  const s = await serverWithHeldAnswers();
  const outcome = await s.stop({
    graceMs: 30_000,
    flush: () => new Promise<void>(() => {}),
    flushTimeoutMs: 50,
  });
  expect(outcome).toBe("drained");
});
