import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { relayNeeded, startRelay, stopRelays } from "../../worker/instances/ai-relay.ts";

// The relay that lets gateways reach a web process listening on loopback only: a real HTTP
// server on 127.0.0.1, reached through a relay listening on another loopback address.
let web: Server;
let port: number;
beforeAll(async () => {
  web = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ path: req.url, via: req.socket.remoteAddress }));
  });
  await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
  const address = web.address();
  port = typeof address === "object" && address ? address.port : 0;
});
afterAll(async () => {
  await stopRelays();
  web.closeAllConnections();
  await new Promise((resolve) => web.close(resolve));
});

describe("the AI endpoint relay", () => {
  it("pipes the gateways' address to the web on loopback", async () => {
    await expect(fetch(`http://127.0.0.3:${port}/api/ai/v1/models`)).rejects.toThrow();
    await startRelay("127.0.0.3", "127.0.0.1", port);
    const res = await fetch(`http://127.0.0.3:${port}/api/ai/v1/models`);
    expect(await res.json()).toEqual({ path: "/api/ai/v1/models", via: "127.0.0.1" });
    // A second start (another worker, or the same one again) is harmless.
    await startRelay("127.0.0.3", "127.0.0.1", port);
  });

  it("is needed only outside production, with the web on loopback and no AI URL set", () => {
    const saved = { ...process.env };
    try {
      process.env.HOST = "127.0.0.1";
      delete process.env.RUNTIME_PLATFORM_AI_URL;
      resetEnvCache();
      expect(relayNeeded("172.18.0.1")).toBe(true);
      expect(relayNeeded("127.0.0.1")).toBe(false); // the process driver
      expect(relayNeeded(undefined)).toBe(false);
      process.env.HOST = "0.0.0.0";
      resetEnvCache();
      expect(relayNeeded("172.18.0.1")).toBe(false);
      process.env.HOST = "127.0.0.1";
      process.env.RUNTIME_PLATFORM_AI_URL = "http://10.0.0.5:3000/api/ai/v1";
      resetEnvCache();
      expect(relayNeeded("172.18.0.1")).toBe(false);
    } finally {
      process.env = saved;
      resetEnvCache();
    }
  });
});
