import { type AddressInfo, connect, createServer, type Socket } from "node:net";

// A TCP relay on loopback whose client-to-server bytes wait while it is held: what a slow or
// stalled upload looks like to the client, with the server and the client both real.

export interface HoldingProxy {
  port: number;
  /** Bytes the clients have sent so far (forwarded or waiting). */
  received(): number;
  /** Forwards what waited and everything after it. */
  release(): void;
  /** Destroys every connection, and each new one as it comes (a network that drops). */
  cut(): void;
  close(): Promise<void>;
}

export async function holdingProxy(targetPort: number): Promise<HoldingProxy> {
  let held = true;
  let cut = false;
  let received = 0;
  const sockets = new Set<Socket>();
  const flushes = new Set<() => void>();
  const server = createServer((client) => {
    if (cut) return client.destroy();
    const upstream = connect(targetPort, "127.0.0.1");
    const waiting: Buffer[] = [];
    let ended = false;
    const flush = () => {
      for (const chunk of waiting.splice(0)) upstream.write(chunk);
      if (ended) upstream.end();
    };
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => {
        sockets.delete(socket);
        flushes.delete(flush);
        client.destroy();
        upstream.destroy();
      });
    }
    flushes.add(flush);
    upstream.pipe(client);
    client.on("data", (chunk: Buffer) => {
      received += chunk.length;
      waiting.push(chunk);
      if (!held) flush();
    });
    client.on("end", () => {
      ended = true;
      if (!held) flush();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received: () => received,
    release() {
      held = false;
      for (const flush of flushes) flush();
    },
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
