import { randomBytes } from "node:crypto";
import WebSocket from "ws";
import { freePort } from "../app/server/platform/embedded-postgres.server.ts";
import { startBenchDatabase } from "./bench-database.ts";
import { startNode } from "./servers.ts";

// `npm run bench` (BENCH_INGRESS=0 skips it): the latency a WebSocket frame gains through the
// agent ingress (the built web server, path form, signed in) against a direct connection to the
// same gateway, one frame at a time, in the same run. The gateway is a stand-in that echoes
// (bench/echo-ws.ts): what the ingress adds does not depend on what the gateway does with a frame.

const FRAMES = Number(process.env.BENCH_INGRESS_FRAMES ?? 2000);
const TARGET_P50_MS = 1;
process.env.LOG_LEVEL ??= "silent";
process.env.SEALING_KEY = randomBytes(32).toString("hex");
process.env.SESSION_SECRET = randomBytes(32).toString("hex");
delete process.env.AGENTS_DOMAIN; // the path form: no wildcard DNS needed here

const database = await startBenchDatabase("ingress");
const children: Array<{ stop(): Promise<void> }> = [];
try {
  const { db, closeDb } = await import("../app/server/platform/db.server.ts");
  const { createSession } = await import("../app/server/accounts/sessions.server.ts");
  const { seal } = await import("../app/server/platform/crypto.server.ts");

  const echoPort = await freePort();
  const echo = await startNode("bench/echo-ws.ts", echoPort, "/");
  children.push(echo);
  const webPort = await freePort();
  const web = await startNode("server.ts", webPort, "/api/health", {
    DATABASE_URL: database.databaseUrl,
    SESSION_SECRET: process.env.SESSION_SECRET,
    SEALING_KEY: process.env.SEALING_KEY,
    AGENTS_DOMAIN: "",
  });
  children.push(web);

  const sql = db();
  await sql`insert into users (id, email, name, referral_code)
    values ('usr_benchingress', 'bench-ingress@example.com', 'bench', 'BENCHINGRESS')`;
  await sql`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values ('agt_benchingress', 'usr_benchingress', 'Bench', 'main', 'openai/gpt-4o-mini', 'starter')`;
  await sql`insert into instances (id, user_id, container_name, volume_name, gateway_token_sealed,
      gateway_address, observed_state, desired_state)
    values ('ins_benchingress', 'usr_benchingress', 'c', 'v', ${seal("x")},
            ${`127.0.0.1:${echoPort}`}, 'running', 'running')`;
  const cookie = (await createSession("usr_benchingress")).setCookie.split(";")[0] as string;
  await closeDb();

  const open = (url: string, headers: Record<string, string> = {}) =>
    new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(url, { headers, perMessageDeflate: false });
      ws.once("open", () => resolve(ws));
      ws.once("error", reject);
      ws.once("unexpected-response", (_q, r) => reject(new Error(`upgrade ${r.statusCode}`)));
    });
  const direct = await open(`ws://127.0.0.1:${echoPort}/`);
  const via = await open(`ws://127.0.0.1:${webPort}/agents/agt_benchingress/ui/`, {
    cookie,
    origin: web.url,
  });
  const roundTrip = (ws: WebSocket, frame: string) =>
    new Promise<number>((resolve) => {
      const start = process.hrtime.bigint();
      ws.once("message", () => resolve(Number(process.hrtime.bigint() - start) / 1e6));
      ws.send(frame);
    });
  const frame = JSON.stringify({ type: "req", id: "x", method: "health", params: {} });
  // Warm-up, then the two paths alternate frame by frame, so both see the same machine load.
  for (let i = 0; i < 200; i++) {
    await roundTrip(direct, frame);
    await roundTrip(via, frame);
  }
  const times = { direct: [] as number[], via: [] as number[] };
  for (let i = 0; i < FRAMES; i++) {
    times.direct.push(await roundTrip(direct, frame));
    times.via.push(await roundTrip(via, frame));
  }
  direct.close();
  via.close();
  const pct = (xs: number[], p: number) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;
  const p50 = { direct: pct(times.direct, 0.5), via: pct(times.via, 0.5) };
  const p99 = { direct: pct(times.direct, 0.99), via: pct(times.via, 0.99) };
  const added = p50.via - p50.direct;
  console.warn(
    `\nAgent ingress: one WebSocket frame's round trip (${FRAMES} frames, ms; stand-in echo gateway)\n`,
  );
  console.warn("path              p50     p99");
  console.warn(`direct            ${p50.direct.toFixed(3)}   ${p99.direct.toFixed(3)}`);
  console.warn(`through ingress   ${p50.via.toFixed(3)}   ${p99.via.toFixed(3)}`);
  console.warn(
    `added by ingress  ${added.toFixed(3)}   ${(p99.via - p99.direct).toFixed(3)}   target p50 < ${TARGET_P50_MS} ms: ${added < TARGET_P50_MS ? "met" : "NOT met"}`,
  );
} finally {
  await Promise.all(children.map((c) => c.stop()));
  await database.stop();
}
