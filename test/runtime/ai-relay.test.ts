import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  issueInstanceToken,
  revokeInstanceToken,
} from "../../app/server/ai/instance-tokens.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { relayNeeded, startRelay, stopRelays } from "../../worker/instances/ai-relay.ts";
import { ensureUser } from "../helpers/users.ts";

// The relay that lets gateways reach a web process listening on loopback only: a real HTTP
// server on 127.0.0.1, reached through a relay listening on another loopback address. Every
// tenant's container reaches the relay's address, so it passes the model endpoint only, to
// live instance tokens only (decision 0195).
let web: Server;
let port: number;
let token: string;
const reached: string[] = [];
beforeAll(async () => {
  web = createServer((req, res) => {
    reached.push(req.url ?? "");
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ path: req.url, via: req.socket.remoteAddress }));
  });
  await ensureUser("usr_relay");
  token = await issueInstanceToken("usr_relay", "ins_relay");
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
  const relayed = (path: string, auth?: string) =>
    fetch(`http://127.0.0.3:${port}${path}`, {
      headers: auth ? { authorization: `Bearer ${auth}` } : {},
    });

  it("passes the gateways' model calls to the web on loopback", async () => {
    await expect(relayed("/api/ai/v1/models", token)).rejects.toThrow();
    await startRelay("127.0.0.3", "127.0.0.1", port);
    const res = await relayed("/api/ai/v1/models?x=1", token);
    expect(await res.json()).toEqual({ path: "/api/ai/v1/models?x=1", via: "127.0.0.1" });
    // A second start (another worker, or the same one again) is harmless.
    await startRelay("127.0.0.3", "127.0.0.1", port);
  });

  it("refuses what is not a model call with a live instance token, without reaching the web", async () => {
    await startRelay("127.0.0.3", "127.0.0.1", port);
    reached.length = 0;
    const refused = [
      [await relayed("/api/ai/v1/models"), 401],
      [await relayed("/api/ai/v1/models", "ait_not-a-token"), 401],
      [await relayed("/api/ai/v1/models", "usr_session"), 401],
      [await relayed("/api/agents", token), 404],
      [await relayed("/ops", token), 404],
      // Dot segments, plain and encoded, resolve outside the endpoint as the web would read them.
      [await relayed("/api/ai/v1/%2e%2e/%2e%2e/agents", token), 404],
      [await relayed("/api/ai/v1/%2E%2E/%2E%2E/%2E%2E/ops", token), 404],
    ] as const;
    for (const [res, status] of refused) {
      expect(res.status).toBe(status);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    }
    const revoked = await issueInstanceToken("usr_relay", "ins_relay_revoked");
    await revokeInstanceToken(revoked);
    expect((await relayed("/api/ai/v1/models", revoked)).status).toBe(401);
    expect(reached).toEqual([]);
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
