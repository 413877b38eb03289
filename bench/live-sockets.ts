import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import autocannon from "autocannon";
import WebSocket from "ws";
import { freePort } from "../app/server/platform/embedded-postgres.server.ts";
import { openFilesLimit } from "../app/server/platform/open-files.server.ts";
import { startBenchDatabase } from "./bench-database.ts";
import { startNode } from "./servers.ts";

// `npm run bench` (BENCH_SOCKETS=0 skips it; `npm run bench:sockets` alone): what open
// connections cost the web tier (issue 53, decision 0220). Against one built web process it
// opens BENCH_LIVE_SOCKETS live agent sockets (/agent/<id>, default 10,000) from as many users as
// the per-user cap needs, and BENCH_PROGRESS_STREAMS event streams (default 1,000) of agents
// that are starting; BENCH_CHATTING of the sockets (default 20) chat with a stand-in gateway
// (bench/fake-gateway-ws.ts) all along. It prints the web's added memory per connection and the
// read rows' throughput with the connections open against their figure without them (measured
// before they open and after they close, so machine load that drifts shows as a gap between the
// two). Goals: ≤ 400 MiB added; reads within 10 %.

const SOCKETS = Number(process.env.BENCH_LIVE_SOCKETS ?? 10_000);
const STREAMS = Number(process.env.BENCH_PROGRESS_STREAMS ?? 1_000);
const CHATTING = Math.min(SOCKETS, Number(process.env.BENCH_CHATTING ?? 20));
/** Each chatting socket sends its next turn this long after the last one ended. */
const CHAT_EVERY_MS = Number(process.env.BENCH_CHAT_EVERY_MS ?? 1_000);
const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = 50;
/** Connections opened at once while filling up. */
const OPENING = 100;
/**
 * Connections per loopback source address. A client socket bound to an address before it
 * connects takes its port from the odd half of the ephemeral range (Linux ≥ 4.6; 32768–60999
 * here): past ~7,000 on one address each bind searched longer (opening slowed from ~250 to ~20
 * a second, the bench's own system time), so a new address every 5,000.
 */
const PER_SOURCE = 5_000;
const GOAL_ADDED_MIB = 400;
const GOAL_READ_RATIO = 0.9;
const SOCKET_CAP = 50; // the web's defaults (LIVE_SOCKETS_PER_USER, PROGRESS_STREAMS_PER_USER)
const STREAM_CAP = 5;

process.env.LOG_LEVEL ??= "silent";
process.env.SEALING_KEY = randomBytes(32).toString("hex");
process.env.SESSION_SECRET = randomBytes(32).toString("hex");
delete process.env.AGENTS_DOMAIN;

interface BenchUser {
  id: string;
  agentId: string;
  cookie: string;
}

const mib = (bytes: number) => bytes / 1024 / 1024;
const source = (i: number) => `127.0.0.${2 + Math.floor(i / PER_SOURCE)}`;

/** Resident memory of a process, bytes (Linux). */
function rss(pid: number): number {
  const line = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(line?.[1] ?? 0) * 1024;
}

/** CPU (user + system) a process has used so far, ms (Linux, clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** CPU ms per second a process uses over 5 s. */
async function cpuRate(pid: number): Promise<number> {
  const start = cpuMs(pid);
  await new Promise((r) => setTimeout(r, 5_000));
  return (cpuMs(pid) - start) / 5;
}

/** The median of a few samples a second apart: one sample lands on a GC now and then. */
async function steadyRss(pid: number): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    samples.push(rss(pid));
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return samples.sort((a, b) => a - b)[2] ?? 0;
}

/** Runs `open` for 0..n-1, `OPENING` at a time, saying how far it got every 1,000. */
async function fill(what: string, n: number, open: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(OPENING, n) }, async () => {
      while (next < n) {
        await open(next++);
        if (++done % 1_000 === 0) {
          const s = (performance.now() - started) / 1000;
          process.stderr.write(`[sockets] ${done} ${what} open (${s.toFixed(0)} s)\n`);
        }
      }
    }),
  );
}

const database = await startBenchDatabase("sockets", { max_connections: "200" });
const children: Array<{ stop(): Promise<void> }> = [];
const sockets: WebSocket[] = [];
const streams: http.ClientRequest[] = [];
try {
  const { db, closeDb } = await import("../app/server/platform/db.server.ts");
  const { createSession } = await import("../app/server/accounts/sessions.server.ts");
  const { createApiKey } = await import("../app/server/accounts/api-keys.server.ts");
  const { seal } = await import("../app/server/platform/crypto.server.ts");
  const { generateDeviceIdentity } = await import(
    "../app/server/openclaw/device-identity.server.ts"
  );

  const gatewayPort = await freePort();
  children.push(await startNode("bench/fake-gateway-ws.ts", gatewayPort, "/"));
  const web = await startNode("server.ts", await freePort(), "/api/health", {
    DATABASE_URL: database.databaseUrl,
    SESSION_SECRET: process.env.SESSION_SECRET,
    SEALING_KEY: process.env.SEALING_KEY,
    AGENTS_DOMAIN: "",
    // Reads and chat turns go through the limiters without being refused.
    RATE_LIMIT_SCALE: "1000000",
    AGENT_MESSAGE_RECORDER: "off",
  });
  children.push(web);
  const webPid = web.process.pid as number;
  const host = new URL(web.url);

  // Users: those holding live sockets have a running (stand-in) gateway; those holding event
  // streams have an agent still being provisioned, so that their streams stay open.
  const sql = db();
  const device = seal(generateDeviceIdentity().privateKeyPem);
  const makeUser = async (id: string, running: boolean): Promise<BenchUser> => {
    await sql`insert into users (id, email, name, referral_code)
      values (${id}, ${`${id}@example.com`}, 'bench', ${id.toUpperCase()})`;
    const agentId = `agt_${id.slice(4)}`;
    await sql`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${agentId}, ${id}, 'Bench', 'main', 'openai/gpt-4o-mini', 'starter')`;
    if (running) {
      await sql`insert into instances (id, user_id, container_name, volume_name,
          gateway_token_sealed, gateway_address, device_id, device_private_key_sealed,
          paired_at, observed_state, desired_state, health, started_at)
        values (${`ins_${id.slice(4)}`}, ${id}, ${`c_${id}`}, ${`v_${id}`}, ${seal("bench")},
          ${`127.0.0.1:${gatewayPort}`}, ${`device-${id}`}, ${device}, now(), 'running',
          'running', 'healthy', now())`;
    }
    const cookie = (await createSession(id)).setCookie.split(";")[0] as string;
    return { id, agentId, cookie };
  };
  const socketUsers: BenchUser[] = [];
  for (let i = 0; i < Math.ceil(SOCKETS / SOCKET_CAP); i++) {
    socketUsers.push(await makeUser(`usr_sock${i}`, true));
  }
  const streamUsers: BenchUser[] = [];
  for (let i = 0; i < Math.ceil(STREAMS / STREAM_CAP); i++) {
    streamUsers.push(await makeUser(`usr_strm${i}`, false));
  }
  // The reads' own user: their agents on a running gateway, read with an API key and a cookie.
  const reader = await makeUser("usr_reader", true);
  const key = (await createApiKey(reader.id, "bench")).key;
  await closeDb();

  const reads = [
    {
      name: "GET /api/agents (API key)",
      path: "/api/agents",
      headers: { authorization: `Bearer ${key}` },
    },
    { name: "GET /api/user (cookie)", path: "/api/user", headers: { cookie: reader.cookie } },
    {
      name: "GET /api/agents/:id (cookie)",
      path: `/api/agents/${reader.agentId}`,
      headers: { cookie: reader.cookie },
    },
  ];
  /** Each read's rate and the web's CPU ms per request (the steadier figure on a shared host). */
  const measureReads = async () => {
    const out: Array<{ rps: number; cpu: number }> = [];
    for (const r of reads) {
      const target = { url: `${web.url}${r.path}`, connections: CONNECTIONS, headers: r.headers };
      await autocannon({ ...target, duration: 1 });
      const cpuBefore = cpuMs(webPid);
      const result = await autocannon({ ...target, duration: DURATION });
      const cpu = (cpuMs(webPid) - cpuBefore) / Math.max(1, result.requests.total);
      if (result.non2xx || result.errors) {
        throw new Error(`${r.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
      }
      out.push({ rps: result.requests.average, cpu });
    }
    return out;
  };

  await measureReads(); // warm-up: the JIT, the pools and the caches settle
  const loadBefore = os.loadavg()[0] ?? 0;
  const before = await measureReads();
  const rssBefore = await steadyRss(webPid);
  const baseCpu = await cpuRate(webPid);

  // The live sockets: each user's up to the cap, spread over loopback source addresses.
  const openedAt = performance.now();
  let refused = 0;
  await fill("live sockets", SOCKETS, async (i) => {
    const user = socketUsers[Math.floor(i / SOCKET_CAP)]!;
    const ws = new WebSocket(`ws://${host.host}/agent/${user.id}`, {
      headers: { cookie: user.cookie, origin: web.url },
      localAddress: source(i),
      perMessageDeflate: false,
    });
    sockets.push(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once("message", () => resolve()); // {type: "ready"}
      ws.once("unexpected-response", (_q, r) => {
        refused++;
        reject(new Error(`live socket refused: ${r.statusCode}`));
      });
      ws.once("close", (code) => reject(new Error(`live socket closed: ${code}`)));
      ws.once("error", reject);
    });
  });
  const socketsSeconds = (performance.now() - openedAt) / 1000;
  // The per-user cap holds: one more socket of a full user is refused before its upgrade.
  const overCap = await new Promise<number>((resolve) => {
    const user = socketUsers[0]!;
    const ws = new WebSocket(`ws://${host.host}/agent/${user.id}`, {
      headers: { cookie: user.cookie, origin: web.url },
      localAddress: source(SOCKETS),
    });
    ws.once("unexpected-response", (_q, r) => resolve(r.statusCode ?? 0));
    ws.once("message", () => {
      ws.close();
      resolve(101);
    });
    ws.once("error", () => resolve(0));
  });

  // The event streams: each waits for its first `progress` event.
  await fill("event streams", STREAMS, async (i) => {
    const user = streamUsers[Math.floor(i / STREAM_CAP)]!;
    await new Promise<void>((resolve, reject) => {
      const req = http.get(
        `${web.url}/api/agents/${user.agentId}/events`,
        { headers: { cookie: user.cookie }, agent: false, localAddress: source(SOCKETS + i) },
        (res) => {
          if (res.statusCode !== 200) {
            reject(new Error(`event stream answered ${res.statusCode}`));
            res.resume();
            return;
          }
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            if (chunk.includes("event: progress")) resolve();
          });
        },
      );
      req.on("error", reject);
      streams.push(req);
    });
  });

  // Held idle first: what the open connections cost on their own (the web's CPU per second,
  // the rechecks, keep-alives and timers), then the reads beside them.
  const loads: Record<string, number> = { before: loadBefore };
  const idleCpu = await cpuRate(webPid);
  const rssWith = await steadyRss(webPid);
  loads.idle = os.loadavg()[0] ?? 0;
  const idle = await measureReads();

  // Then some sockets chat all along (a turn, then the next CHAT_EVERY_MS after it ends).
  let chatting = true;
  const turns: number[] = [];
  let turnErrors = 0;
  const chats = sockets.slice(0, CHATTING).map(async (ws, n) => {
    for (let t = 0; chatting; t++) {
      const id = `c${n}-${t}`;
      const started = performance.now();
      const ended = await new Promise<boolean>((resolve) => {
        const onMessage = (data: WebSocket.Data) => {
          const frame = JSON.parse(String(data)) as { id?: string; type?: string };
          if (frame.id !== id || (frame.type !== "final" && frame.type !== "error")) return;
          ws.off("message", onMessage);
          resolve(frame.type === "final");
        };
        ws.on("message", onMessage);
        ws.send(JSON.stringify({ type: "chat", id, message: "Hello" }));
      });
      if (ended) turns.push(performance.now() - started);
      else turnErrors++;
      await new Promise((r) => setTimeout(r, CHAT_EVERY_MS));
    }
  });
  const chatCpu = await cpuRate(webPid);
  loads.chatting = os.loadavg()[0] ?? 0;
  const chatting_ = await measureReads();
  const rssAfterReads = rss(webPid);
  chatting = false;
  await Promise.all(chats);

  for (const ws of sockets.splice(0)) ws.terminate();
  for (const req of streams.splice(0)) req.destroy();
  loads.after = os.loadavg()[0] ?? 0;
  const after = await measureReads();

  const connections = SOCKETS + STREAMS;
  const added = rssWith - rssBefore;
  const limit = openFilesLimit(webPid);
  const pad = (s: string, n: number) => s.padEnd(n);
  const p50 = [...turns].sort((a, b) => a - b)[Math.floor(turns.length / 2)] ?? 0;
  console.warn(
    `\nOpen connections on one web process (issue 53): ${SOCKETS} live sockets from ${socketUsers.length} users, ${STREAMS} event streams from ${streamUsers.length} users; then ${CHATTING} of the sockets chatting with a stand-in gateway\n`,
  );
  console.warn(
    `host: ${os.cpus().length} cores, load average (1 min) before ${loads.before?.toFixed(1)}, idle ${loads.idle?.toFixed(1)}, chatting ${loads.chatting?.toFixed(1)}, after ${loads.after?.toFixed(1)}; web open files ${limit?.soft ?? "?"}/${limit?.hard ?? "?"}`,
  );
  console.warn(
    `opened the sockets in ${socketsSeconds.toFixed(1)} s (refused ${refused}); one more of a full user: ${overCap} (want 429)`,
  );
  console.warn(
    `web CPU with nothing asked: ${baseCpu.toFixed(0)} ms/s without connections, ${idleCpu.toFixed(0)} ms/s holding them, ${chatCpu.toFixed(0)} ms/s with the chats`,
  );
  console.warn(
    `chat turns during the reads: ${turns.length} (p50 ${p50.toFixed(1)} ms), failed ${turnErrors}`,
  );
  console.warn(
    `web RSS: ${mib(rssBefore).toFixed(0)} MiB without, ${mib(rssWith).toFixed(0)} MiB with the connections (${mib(rssAfterReads).toFixed(0)} after the reads and chats): added ${mib(added).toFixed(0)} MiB, ${(added / connections / 1024).toFixed(1)} KiB per connection; goal ≤ ${GOAL_ADDED_MIB} MiB: ${mib(added) <= GOAL_ADDED_MIB ? "met" : "NOT met"}\n`,
  );
  console.warn(
    `${pad("read", 30)} ${pad("req/s without", 14)} ${pad("idle", 6)} ${pad("ratio", 6)} ${pad("chats", 6)} ${pad("ratio", 6)} ${pad("goal ≥ 0.9 (idle)", 18)} CPU ms/req without, idle, chats`,
  );
  for (const [i, r] of reads.entries()) {
    const zero = { rps: 0, cpu: 0 };
    const b = before[i] ?? zero;
    const a = after[i] ?? zero;
    const d = idle[i] ?? zero;
    const c = chatting_[i] ?? zero;
    const without = (b.rps + a.rps) / 2;
    const ratio = d.rps / without;
    console.warn(
      `${pad(r.name, 30)} ${pad(`${without.toFixed(0)} (${b.rps.toFixed(0)}/${a.rps.toFixed(0)})`, 14)} ${pad(d.rps.toFixed(0), 6)} ${pad(ratio.toFixed(2), 6)} ${pad(c.rps.toFixed(0), 6)} ${pad((c.rps / without).toFixed(2), 6)} ${pad(ratio >= GOAL_READ_RATIO ? "met" : "NOT met", 18)} ${((b.cpu + a.cpu) / 2).toFixed(3)}, ${d.cpu.toFixed(3)}, ${c.cpu.toFixed(3)}`,
    );
  }
  console.warn(
    "without: the mean of before the connections open and after they close (each in brackets)",
  );
} finally {
  for (const ws of sockets) ws.terminate();
  for (const req of streams) req.destroy();
  await Promise.all(children.map((c) => c.stop()));
  await database.stop();
}
