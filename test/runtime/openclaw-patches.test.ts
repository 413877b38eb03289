import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";
import { describeDocker, GATEWAY_IMAGE } from "./docker-support.ts";

// The platform's fixes to OpenClaw (gateway/patch-openclaw.mjs, decision 0242): the state
// lease's start-up bound, 5 s in OpenClaw, failed every boot on a starved CPU (measured: a first
// boot under --cpus 0.08 exits with "state lease heartbeat did not become ready … timeoutMs=5000").

const run = promisify(execFile);
const script = path.resolve("gateway/patch-openclaw.mjs");
const ORIGINAL = "const LEASE_HEARTBEAT_START_TIMEOUT_MS = 5e3;";
const FILE = "openclaw-state-lease-heartbeat-shared-Ab_1.mjs";
const tmp = mkdtempSync(path.join(os.tmpdir(), "openclaw-patches-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A node_modules with an OpenClaw dist holding `text` in the lease file. */
function install(name: string, text: string): { modules: string; dist: string } {
  const modules = path.join(tmp, name, "node_modules");
  const dist = path.join(modules, "openclaw", "dist");
  mkdirSync(dist, { recursive: true });
  writeFileSync(path.join(dist, FILE), `//#region\n${text}\nexport { x as t };\n`);
  return { modules, dist };
}

const patchWith = (modules: string, out: string) => run(process.execPath, [script, modules, out]);

it("writes the lease file with the raised bound beside the install, and patches one in place once", async () => {
  const { modules, dist } = install("fresh", ORIGINAL);
  const out = path.join(tmp, "fresh-out");
  expect((await patchWith(modules, out)).stdout.trim()).toBe(FILE);
  const patched = readFileSync(path.join(out, FILE), "utf8");
  expect(patched).toContain("const LEASE_HEARTBEAT_START_TIMEOUT_MS = 30000;");
  expect(patched).not.toContain("5e3");
  // The install itself is untouched by an out folder elsewhere; patched in place, it stays so.
  expect(readFileSync(path.join(dist, FILE), "utf8")).toContain(ORIGINAL);
  await patchWith(modules, dist);
  await patchWith(modules, dist);
  expect(readFileSync(path.join(dist, FILE), "utf8")).toBe(patched);
});

it("fails the build when OpenClaw's code no longer holds the text the fix replaces", async () => {
  const { modules } = install("changed", "const LEASE_HEARTBEAT_START_TIMEOUT_MS = 8e3;");
  const failed = await patchWith(modules, path.join(tmp, "changed-out")).catch(
    (error: { code: number; stderr: string }) => error,
  );
  expect(failed).toMatchObject({ code: 1 });
  expect((failed as { stderr: string }).stderr).toContain("OpenClaw changed");
});

describeDocker("the gateway image", () => {
  it("carries the raised lease bound in the module the gateway loads", async () => {
    // The module's export read by the image's own node, from the path OpenClaw imports it.
    const { stdout } = await run("docker", [
      "run",
      "--rm",
      "--network",
      "none",
      "--entrypoint",
      "sh",
      GATEWAY_IMAGE,
      "-c",
      "cd /opt/openclaw/node_modules/openclaw/dist && node --input-type=module -e \"const [f] = (await import('node:fs')).readdirSync('.').filter((n) => n.startsWith('openclaw-state-lease-heartbeat-shared-')); console.log((await import('./' + f)).t)\"",
    ]);
    expect(Number(stdout.trim())).toBe(30_000);
  });
});
