import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { withGateway } from "../../app/server/agents/instance-gateway.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { issueInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { runAction } from "../../worker/instances/actions.ts";
import { startRelay, stopRelays } from "../../worker/instances/ai-relay.ts";
import { ensureContainer } from "../../worker/instances/container.ts";
import { GATEWAY_PORT, gatewayNetworkName } from "../../worker/instances/engine.ts";
import { observe } from "../../worker/instances/observe.ts";
import {
  type GatewayBench,
  provisionRealGateway,
  startGatewayBench,
  stopGatewayBench,
} from "../helpers/real-gateway.ts";
import { ensureUser } from "../helpers/users.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { describeDocker, ensureHealthzImage } from "../runtime/docker-support.ts";

// A hostile tenant (decision 0195): tenant A's real gateway runs an attacker script in its
// container, as an agent's shell tool or a prompt-injected command could, and tries one by one
// each address and port this test made: tenant B's gateway (and the address B held before a
// restart), the host's address on A's own network and on the shared one (where the relay to
// the model endpoint listens), the relay without a token and outside the model endpoint, the
// test database's port and the engine's API ports. Never a range scan, never an address the
// test did not make. B is a stand-in that answers the gateway port, made by the platform's own
// container code (no second OpenClaw boot).

const openai = createOpenAiFake();
let bench: GatewayBench | undefined;
let a: InstanceRow;
let b: InstanceRow;
let web: Server | undefined;
let relayPort = 0;

interface Probe {
  host: string;
  port: number;
  /** Send an HTTP GET of this path (with this bearer token) and report the status. */
  path?: string;
  token?: string;
}

/** What the attacker in A's container sees of each target: open, a status, or not reached. */
const ATTACKER = `
const net = require("net"), http = require("http");
const probes = JSON.parse(process.argv[1]);
const one = (p) => new Promise((done) => {
  if (p.path) {
    const req = http.get({ host: p.host, port: p.port, path: p.path, timeout: 3000,
      headers: p.token ? { authorization: "Bearer " + p.token } : {} }, (res) => {
      res.resume(); done("http " + res.statusCode); });
    req.on("timeout", () => { req.destroy(); done("timeout"); });
    req.on("error", (e) => done(e.code || "error"));
    return;
  }
  const s = net.connect({ host: p.host, port: p.port, timeout: 3000 });
  s.on("connect", () => { s.destroy(); done("open"); });
  s.on("timeout", () => { s.destroy(); done("timeout"); });
  s.on("error", (e) => done(e.code || "error"));
});
Promise.all(probes.map(one)).then((r) => console.log(JSON.stringify(r)));
`;

async function attack(probes: Probe[]): Promise<Record<string, string>> {
  const rt = bench?.rt;
  if (!rt || !a.container_id) throw new Error("no attacker container");
  const result = await rt.exec(a.container_id, ["node", "-e", ATTACKER, JSON.stringify(probes)], {
    timeoutMs: 20_000,
  });
  const seen = JSON.parse(result.stdout.trim().split("\n").at(-1) ?? "[]") as string[];
  return Object.fromEntries(
    probes.map((p, i) => [
      `${p.host}:${p.port}${p.path ?? ""}${p.token ? " +token" : ""}`,
      seen[i] ?? "none",
    ]),
  );
}

const hostOf = (address: string | null) => (address ?? "").split(":")[0] ?? "";

/** The host's address on a network (its gateway), read from the engine. */
async function networkGateway(name: string): Promise<string> {
  const info = await bench?.rt.docker.getNetwork(name).inspect();
  return info?.IPAM?.Config?.[0]?.Gateway ?? "";
}

describeDocker("a hostile tenant", () => {
  beforeAll(async () => {
    bench = await startGatewayBench({ openai });
    await ensureUser("usr_tenant_a");
    await ensureUser("usr_tenant_b");
    // B: the platform's container path on a stand-in image that answers the gateway port.
    const image = ensureHealthzImage();
    const recordB = await ensureInstanceRecord("usr_tenant_b", { plan: "solo" });
    await updateInstance(recordB.id, { image });
    await ensureContainer((await getInstance(recordB.id)) as InstanceRow);
    b = await observe((await getInstance(recordB.id)) as InstanceRow);
    ({ instance: a } = await provisionRealGateway("usr_tenant_a"));
    // The relay a laptop's `npm start` runs in front of a web on loopback, on the shared
    // network's address (where every gateway reaches the platform), to a web of its own here.
    web = createServer((_req, res) => res.end("the web"));
    await new Promise<void>((resolve) => web?.listen(0, "127.0.0.1", resolve));
    relayPort = (web.address() as { port: number }).port;
    await startRelay(bench.gatewayIp, "127.0.0.1", relayPort);
  }, 180_000);

  afterAll(async () => {
    await stopRelays();
    web?.closeAllConnections();
    web?.close();
    await stopGatewayBench(bench);
  });

  it("has each gateway alone on a network of its own", async () => {
    const rt = bench?.rt;
    const [infoA, infoB] = await Promise.all([
      rt?.inspect(a.container_name),
      rt?.inspect(b.container_name),
    ]);
    expect(infoA?.networks).toEqual([gatewayNetworkName(a.container_name)]);
    expect(infoB?.networks).toEqual([gatewayNetworkName(b.container_name)]);
    expect(b.gateway_address).toMatch(/^10\.213\.\d+\.\d+:18789$/);
    const network = await rt?.docker.getNetwork(gatewayNetworkName(b.container_name)).inspect();
    expect(network?.Options?.["com.docker.network.bridge.enable_icc"]).toBe("false");
    expect(Object.keys(network?.Containers ?? {})).toHaveLength(1);
  });

  it("reaches nothing of tenant B or of the platform from inside its gateway", async () => {
    const ownGateway = await networkGateway(gatewayNetworkName(a.container_name));
    const shared = bench?.gatewayIp ?? "";
    const dbPort = Number(new URL(env().DATABASE_URL ?? "").port);
    const token = await issueInstanceToken("usr_tenant_a", a.id);
    const seen = await attack([
      // Its own gateway answers: the probe sees what is open (the check can fail).
      { host: hostOf(a.gateway_address), port: GATEWAY_PORT },
      { host: hostOf(b.gateway_address), port: GATEWAY_PORT },
      { host: hostOf(b.gateway_address), port: GATEWAY_PORT, path: "/healthz" },
      { host: ownGateway, port: dbPort },
      { host: shared, port: dbPort },
      { host: ownGateway, port: 2375 },
      { host: ownGateway, port: 2376 },
      { host: shared, port: 2375 },
      { host: ownGateway, port: relayPort, path: "/api/ai/v1/models" },
      { host: shared, port: relayPort, path: "/api/ai/v1/models" },
      { host: shared, port: relayPort, path: "/api/ai/v1/models", token: "ait_forged" },
      { host: shared, port: relayPort, path: "/api/agents", token },
      { host: shared, port: relayPort, path: "/api/ai/v1/%2e%2e/%2e%2e/agents", token },
    ]);
    const unreached = (target: string) =>
      expect(["timeout", "ECONNREFUSED", "EHOSTUNREACH"]).toContain(seen[target]);
    expect(seen[`${hostOf(a.gateway_address)}:${GATEWAY_PORT}`]).toBe("open");
    unreached(`${hostOf(b.gateway_address)}:${GATEWAY_PORT}`);
    unreached(`${hostOf(b.gateway_address)}:${GATEWAY_PORT}/healthz`);
    unreached(`${ownGateway}:${dbPort}`);
    unreached(`${shared}:${dbPort}`);
    unreached(`${ownGateway}:2375`);
    unreached(`${ownGateway}:2376`);
    unreached(`${shared}:2375`);
    // The relay listens on the shared address only, and serves nothing without a live token.
    unreached(`${ownGateway}:${relayPort}/api/ai/v1/models`);
    expect(seen[`${shared}:${relayPort}/api/ai/v1/models`]).toBe("http 401");
    expect(seen[`${shared}:${relayPort}/api/ai/v1/models +token`]).toBe("http 401");
    expect(seen[`${shared}:${relayPort}/api/agents +token`]).toBe("http 404");
    expect(seen[`${shared}:${relayPort}/api/ai/v1/%2e%2e/%2e%2e/agents +token`]).toBe("http 404");
  });

  it("keeps no address for a stopped gateway, drops the web's client at once, and never reaches B's old address", async () => {
    const bUser = "usr_tenant_b";
    const before = (await getInstance(b.id)) as InstanceRow;
    // The web's cached client of B's gateway: B's stand-in speaks no gateway protocol, so the
    // drop is watched on A's, whose stop is the same code path.
    const closed = await withGateway("usr_tenant_a", async (client) => vi.spyOn(client, "close"), {
      patientMs: 30_000, // a fresh gateway restarts in place once after its boot
    });
    await runAction((await getInstance(b.id)) as InstanceRow, "stop");
    expect((await getInstance(b.id))?.gateway_address).toBeNull();
    await expect(withGateway(bUser, async () => "reached")).rejects.toThrow(
      /not provisioned|not running/,
    );
    // B starts again; the address it held before is on B's own network, which nothing of A's
    // can join, and both are out of A's reach.
    await runAction((await getInstance(b.id)) as InstanceRow, "start");
    const after = await observe((await getInstance(b.id)) as InstanceRow);
    expect(after.gateway_address).toMatch(/^10\.213\./);
    const seen = await attack([
      { host: hostOf(before.gateway_address), port: GATEWAY_PORT },
      { host: hostOf(after.gateway_address), port: GATEWAY_PORT },
    ]);
    for (const outcome of Object.values(seen))
      expect(["timeout", "ECONNREFUSED", "EHOSTUNREACH"]).toContain(outcome);
    // A's gateway stops: its address goes and the web's cached client is closed by the
    // notification, not at its next use.
    await runAction((await getInstance(a.id)) as InstanceRow, "stop");
    expect((await getInstance(a.id))?.gateway_address).toBeNull();
    await expect.poll(() => closed.mock.calls.length, { timeout: 10_000 }).toBeGreaterThan(0);
  }, 120_000);
});
