import { DockerRuntime } from "../worker/runtime/docker.ts";
import { StorageQuota } from "../worker/runtime/storage-quota.ts";
import { chaos, faults } from "./soak/chaos.ts";
import {
  type Check,
  checkAnswers,
  checkConvergence,
  checkMoney,
  checkTurns,
  watchConvergence,
} from "./soak/invariants.ts";
import { startPlatform } from "./soak/platform.ts";
import { latencyTable, Recorder, stamp } from "./soak/record.ts";
import { drive } from "./soak/traffic.ts";
import { turns } from "./soak/turns.ts";
import { makeUser, provision, type Role, type SoakUser, waitRunning } from "./soak/users.ts";

// `npm run soak` (issue 52, decision 0218): the platform as `npm start` runs it, real gateways,
// SOAK_AGENTS users with an agent each (roles in turn: talker, small balance, lifecycle) plus
// one that provisions and deletes, traffic for SOAK_SECONDS, faults in its middle third, then
// the invariants, one line each; exit 1 when one fails. Not part of `npm test`.

const SECONDS = Number(process.env.SOAK_SECONDS ?? 900);
const AGENTS = Number(process.env.SOAK_AGENTS ?? 20);
// A cold boot takes 20–30 s on a quiet machine and many minutes on a loaded shared one.
const BOOT_TIMEOUT_MS = Number(process.env.SOAK_BOOT_TIMEOUT_S ?? 900) * 1000;
const rec = new Recorder();
const log = (line: string) => process.stdout.write(`${line}\n`);
const roles: Role[] = ["talker", "small-balance", "lifecycle"];
const CREDIT = { normal: 50_000_000, small: 60_000 }; // micro-USD

// Whether gateways outlive the engine fault (decision 0239) is part of what a run measures.
const liveRestore = await new DockerRuntime().liveRestore().then(
  (on) => (on ? "on" : "off"),
  () => "unknown",
);
log(
  `soak: ${AGENTS} agents (+1 churning), ${SECONDS} s, engine chaos ${process.env.SOAK_ENGINE_CHAOS === "1" ? "on" : "off"}, the engine's live-restore ${liveRestore}`,
);
const p = await startPlatform((line) => log(`${stamp(rec)} ${line}`));
let failed = true;
// Ctrl-C: stop the platform and remove what the run made, as at the end.
const interrupted = new Promise<void>((resolve) => {
  process.once("SIGINT", () => resolve());
  process.once("SIGTERM", () => resolve());
});
void interrupted.then(async () => {
  log("interrupted: stopping the platform");
  await p.stop().catch(() => {});
  await removeLeftovers(p.deployment, p.network);
  process.exit(130);
});
try {
  log(`${stamp(rec)} platform up at ${p.url} (deployment ${p.deployment})`);
  const users: SoakUser[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const role = roles[i % roles.length] ?? "talker";
    const credit = role === "small-balance" ? CREDIT.small : CREDIT.normal;
    users.push(await makeUser(rec, p.url, p.sql, i, role, credit));
  }
  const churner = await makeUser(rec, p.url, p.sql, AGENTS, "churn", CREDIT.normal);
  // The set-up (ten minutes and more here) is longer than the idle period: without this, every
  // agent slept before the traffic began, and its first chats woke twenty gateways at once
  // (decision 0238). The traffic starts with all of them awake; the idle roles sleep during it.
  const keepAwake = setInterval(() => {
    void p.sql`update instances set last_activity_at = now()
      where user_id = any(${users.map((u) => u.id)}::text[])`.catch(() => {});
  }, 10_000);
  try {
    // Two boots at a time: the machine is shared.
    for (let i = 0; i < users.length; i += 2) {
      await Promise.all(
        users.slice(i, i + 2).map(async (u) => {
          if (!(await provision(rec, p.url, u))) throw new Error(`provisioning ${u.id} failed`);
          if (!(await waitRunning(rec, p.url, u, BOOT_TIMEOUT_MS)))
            throw new Error(`${u.id} never ran`);
        }),
      );
    }
  } finally {
    clearInterval(keepAwake);
  }
  log(`${stamp(rec)} ${users.length} agents running; traffic for ${SECONDS} s`);
  rec.samples.length = 0; // set-up is not traffic

  const begin = Date.now();
  const until = begin + SECONDS * 1000;
  const traffic = drive({ base: p.url, rec, until, log }, [...users, churner]);
  const third = (SECONDS * 1000) / 3;
  const chaosStart = begin + third;
  await new Promise((r) => setTimeout(r, chaosStart - Date.now()));
  rec.phase = "during";
  const events = await chaos(
    faults(p, rec, users),
    rec,
    chaosStart,
    begin + 2 * third - 30_000,
    log,
  );
  const lastChaos = Date.now();
  rec.phase = "after";
  const watch = watchConvergence(p, [...users, churner], lastChaos);
  await traffic;
  const watched = await watch.stop();
  log(`${stamp(rec)} traffic over; checking (convergence deadline: 60 s after the last fault)`);

  const everyone = [...users, churner];
  const checks: Check[] = [
    ...(await checkConvergence(
      p,
      everyone,
      lastChaos,
      Math.max(Date.now(), lastChaos + 60_000) + 60_000,
      watched,
    )),
    ...(await checkTurns(p, turns, everyone)),
    ...(await checkMoney(p)),
    ...checkAnswers(rec.samples),
  ];
  log("\nchaos events:");
  for (const e of events) log(`  ${new Date(e.at).toISOString()} ${e.name}: ${e.detail}`);
  log("\nlatency p50/p99 of answered requests (any HTTP status) per kind and phase:");
  for (const line of latencyTable(rec.samples)) log(`  ${line}`);
  log("\ninvariants:");
  for (const c of checks) log(`  ${c.pass ? "PASS" : "FAIL"}  ${c.name}: ${c.figure}`);
  failed = checks.some((c) => !c.pass);
} catch (error) {
  log(`soak failed to run: ${error instanceof Error ? error.stack : error}`);
} finally {
  await p.stop().catch((error: unknown) => log(`stopping the platform: ${error}`));
  await removeLeftovers(p.deployment, p.network);
}
process.exit(failed ? 1 : 0);

/** What the run left on the engine (after the checks, which counted it). */
async function removeLeftovers(deployment: string, network: string) {
  const { execFile } = await import("node:child_process");
  const { promisify } = await import("node:util");
  const run = promisify(execFile);
  const label = `label=agent-platform.deployment=${deployment}`;
  const list = async (args: string[]) =>
    (await run("docker", args).catch(() => ({ stdout: "" }))).stdout.split("\n").filter(Boolean);
  const containers = await list(["ps", "-aq", "--filter", label]);
  if (containers.length) await run("docker", ["rm", "-f", "-v", ...containers]).catch(() => {});
  const volumes = await list(["volume", "ls", "-q", "--filter", label]);
  if (volumes.length) await run("docker", ["volume", "rm", "-f", ...volumes]).catch(() => {});
  // A limited volume's data is a subvolume of the storage root, which `docker volume rm` leaves:
  // a few runs' worth filled the bench root and every later provision failed.
  const probed = await StorageQuota.probe(process.env.SOAK_STORAGE_ROOT);
  if ("quota" in probed) {
    for (const v of volumes) {
      await probed.quota.remove(v).catch((e: unknown) => log(`removing subvolume ${v}: ${e}`));
    }
  }
  const networks = await list(["network", "ls", "-q", "--filter", label]);
  for (const n of [...networks, network]) await run("docker", ["network", "rm", n]).catch(() => {});
}
