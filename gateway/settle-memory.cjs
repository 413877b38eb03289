"use strict";
// Preloaded into the gateway's main process by the entrypoint (node --require). Once the gateway
// has started (its /healthz answers) and its event loop has gone quiet, runs ONE memory-reducing
// full garbage collection, then does nothing more.
//
// Why (decision 0154): OpenClaw's start-up leaves ~70 MiB of garbage and unshrunk heap that V8
// keeps until its memory reducer's watchdog fires, about 100 s after the gateway is healthy;
// an idle gateway sits at ~620 MiB until then. One last-resort GC at the first quiet moment
// brings it to ~575 MiB at once, for ~0.7 s of CPU once per boot.
//
// `gc` is reached by turning --expose-gc on, taking the function from a fresh context, and
// turning the flag off again: V8's flag hash, which keys Node's compile cache, is then what it
// was, so modules loaded later still use the cache baked into the image (a flag left on makes
// them compile cold and rewrite their entries).
//
// Enabled by AGENT_GATEWAY_SETTLE_MEMORY=1 (the entrypoint sets it unless it is set); the variable
// is removed here so that child processes and worker threads of the gateway do not run it too.

const ENV = "AGENT_GATEWAY_SETTLE_MEMORY";
const enabled = process.env[ENV] === "1";
delete process.env[ENV];

// Started: /healthz answers 200 on the gateway's port. Quiet: then at least 5 s later (the
// channels and sidecars start just after healthy), under 5 % event-loop utilisation for 2 s in a
// row. (Quiet alone is not enough: a boot can idle for seconds, waiting on a state lease.)
const AFTER_HEALTHY_S = 5;
const QUIET_UTILISATION = 0.05;
const QUIET_SECONDS = 2;
// A gateway that never gets there (busy from the start, or no HTTP port) is left to V8.
const GIVE_UP_S = 600;

if (enabled) {
  const { performance } = require("node:perf_hooks");
  const port = portOf(process.argv);
  let last = performance.eventLoopUtilization();
  let quiet = 0;
  let healthyAt = 0;
  let probing = false;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const utilisation = performance.eventLoopUtilization(now, last).utilization;
    quiet = utilisation < QUIET_UTILISATION ? quiet + 1 : 0;
    last = now;
    const uptime = process.uptime();
    if (uptime > GIVE_UP_S) return clearInterval(timer);
    if (!healthyAt) {
      if (!probing) {
        probing = true;
        healthz(port).then((ok) => {
          probing = false;
          if (ok) healthyAt = process.uptime();
        });
      }
      return;
    }
    if (uptime - healthyAt < AFTER_HEALTHY_S || quiet < QUIET_SECONDS) return;
    clearInterval(timer);
    settle();
  }, 1000);
  timer.unref();
}

/** The gateway's `--port N` / `--port=N` (OpenClaw's default 18789). */
function portOf(argv) {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--port" && argv[i + 1]) return Number(argv[i + 1]);
    if (argv[i].startsWith("--port=")) return Number(argv[i].slice("--port=".length));
  }
  return 18789;
}

/** Whether the gateway's /healthz answers 200 on loopback within a second. */
function healthz(port) {
  const http = require("node:http");
  return new Promise((resolve) => {
    const req = http.get(
      { host: "127.0.0.1", port, path: "/healthz", timeout: 1000, agent: false },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}

function settle() {
  const v8 = require("node:v8");
  const vm = require("node:vm");
  let gc;
  try {
    v8.setFlagsFromString("--expose-gc");
    gc = vm.runInNewContext("gc");
  } finally {
    v8.setFlagsFromString("--no-expose-gc");
  }
  const before = process.memoryUsage().rss;
  const started = process.hrtime.bigint();
  // "last-resort": V8's full collection that also compacts and releases freed pages at once.
  gc({ type: "major", execution: "sync", flavor: "last-resort" });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const mib = (n) => Math.round(n / 1048576);
  const after = process.memoryUsage().rss;
  process.stderr.write(
    `agent-gateway: start-up garbage collected: rss ${mib(before)} -> ${mib(after)} MiB` +
      ` in ${Math.round(ms)} ms\n`,
  );
}
