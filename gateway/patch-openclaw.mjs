#!/usr/bin/env node
// Fixes to the installed OpenClaw, written as whole replacement files into the image's thin
// layer (the base image and its hash stay as they are). Each fix names the exact original text;
// when a new OpenClaw no longer has it, the build fails here, so an upgrade is checked against
// the fix instead of being silently unpatched (as scripts/patch-dependencies.ts does for npm's).
//
// The state lease's start-up bound (docs/decisions/0242): OpenClaw gives up its start when the
// worker thread that renews its state lease is not ready within 5 s, and exits. On a host where
// many gateways boot at once (a 20-agent soak on two cores, decision 0238) the thread gets too
// little CPU in 5 s, every boot fails, and each restart meets the same starved CPU. The bound is
// raised; the lease's own expiry (60 s) still caps it, so a worker that never starts still ends
// the start.
//
// Usage: node gateway/patch-openclaw.mjs <node_modules> <out folder>
//   writes <out>/<file name> for each patched file of node_modules/openclaw/dist and prints the
//   names written; an <out> that is that dist folder itself patches the install in place.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

/** Milliseconds the lease's worker may take to start (OpenClaw's own: 5e3). */
const LEASE_START_TIMEOUT_MS = 30_000;

const patches = [
  {
    file: /^openclaw-state-lease-heartbeat-shared-[\w-]+\.mjs$/,
    original: "const LEASE_HEARTBEAT_START_TIMEOUT_MS = 5e3;",
    patched: `const LEASE_HEARTBEAT_START_TIMEOUT_MS = ${LEASE_START_TIMEOUT_MS}; // agent-gateway: docs/decisions/0242`,
  },
];

const [modules, out] = process.argv.slice(2);
if (!modules || !out) {
  console.error("usage: patch-openclaw.mjs <node_modules> <out folder>");
  process.exit(2);
}
const dist = path.join(modules, "openclaw", "dist");
const names = readdirSync(dist);
mkdirSync(out, { recursive: true });
for (const patch of patches) {
  const matches = names.filter((name) => patch.file.test(name));
  if (matches.length !== 1) {
    console.error(`patch-openclaw: ${patch.file} matches ${matches.length} files in ${dist}, not 1`);
    process.exit(1);
  }
  const name = matches[0];
  const text = readFileSync(path.join(dist, name), "utf8");
  if (text.includes(patch.patched)) {
    // Patched before (the process driver's install is patched in place, again at each check:
    // nothing is written then, and nothing printed into the worker's log).
    if (path.resolve(out) === path.resolve(dist)) continue;
    writeFileSync(path.join(out, name), text);
    console.log(name);
    continue;
  }
  if (text.split(patch.original).length !== 2) {
    console.error(
      `patch-openclaw: ${name} does not hold "${patch.original}" once: OpenClaw changed; check the fix in gateway/patch-openclaw.mjs against it`,
    );
    process.exit(1);
  }
  writeFileSync(path.join(out, name), text.replace(patch.original, patch.patched));
  console.log(name);
}
