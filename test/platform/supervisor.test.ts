import { existsSync as exists, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SupervisorEvent, supervise } from "../../app/server/platform/supervisor.server.ts";

// Real child processes: scripts that crash, or that record when SIGTERM reaches them.
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "supervisor-"));
  // Exits with 3 on its first two runs (counted in a file), then stays up.
  await writeFile(
    path.join(dir, "crashy.mjs"),
    `import { readFileSync, writeFileSync, existsSync } from "node:fs";
const f = process.argv[2];
process.on("SIGTERM", () => process.exit(0));
const runs = existsSync(f) ? Number(readFileSync(f, "utf8")) : 0;
writeFileSync(f, String(runs + 1));
if (runs < 2) process.exit(3);
setInterval(() => {}, 1000);`,
  );
  // Records "<name> got SIGTERM" and "<name> exits" in a shared log, taking a moment to stop.
  await writeFile(
    path.join(dir, "orderly.mjs"),
    `import { appendFileSync } from "node:fs";
const [log, name, ms] = process.argv.slice(2);
process.on("SIGTERM", () => {
  appendFileSync(log, name + " got SIGTERM\\n");
  setTimeout(() => { appendFileSync(log, name + " exits\\n"); process.exit(0); }, Number(ms));
});
appendFileSync(log + "." + name, "ready");
setInterval(() => {}, 1000);`,
  );
  // Ignores SIGTERM: only SIGKILL ends it.
  await writeFile(
    path.join(dir, "stubborn.mjs"),
    `import { writeFileSync } from "node:fs";
process.on("SIGTERM", () => {});
writeFileSync(process.argv[2], "ready");
setInterval(() => {}, 1000);`,
  );
});
afterAll(() => rm(dir, { recursive: true, force: true }));

function collect() {
  const events: SupervisorEvent[] = [];
  return { events, onEvent: (event: SupervisorEvent) => events.push(event) };
}

describe("the npm start supervisor", () => {
  it("restarts a crashed child with a growing back-off until it stays up", async () => {
    const counter = path.join(dir, "runs");
    const seen = collect();
    const lines: string[] = [];
    const supervisor = supervise({
      cwd: dir,
      env: process.env,
      log: (line) => lines.push(line),
      initialBackoffMs: 20,
      maxBackoffMs: 1_000,
      onEvent: seen.onEvent,
      children: [
        { name: "web", args: [path.join(dir, "crashy.mjs"), counter], stopTimeoutMs: 5_000 },
      ],
    });
    // The third run counted itself (after its SIGTERM handler was in place).
    await expect.poll(() => exists(counter) && readFileSync(counter, "utf8")).toBe("3");
    await supervisor.stop();

    const delays = seen.events.flatMap((e) => (e.kind === "restart-scheduled" ? [e.delayMs] : []));
    expect(delays).toEqual([20, 40]);
    expect(seen.events.filter((e) => e.kind === "started")).toHaveLength(3);
    expect(lines.filter((l) => l.includes("exited unexpectedly (code 3)"))).toHaveLength(2);
    // The third run was stopped, not restarted.
    expect(seen.events.at(-1)).toMatchObject({ kind: "exited", name: "web", code: 0 });
  });

  it("stops the children one after another in the order given", async () => {
    const log = path.join(dir, "order.log");
    const seen = collect();
    const supervisor = supervise({
      cwd: dir,
      env: process.env,
      log: () => {},
      onEvent: seen.onEvent,
      children: [
        {
          name: "web",
          args: [path.join(dir, "orderly.mjs"), log, "web", "150"],
          stopTimeoutMs: 5_000,
        },
        {
          name: "worker",
          args: [path.join(dir, "orderly.mjs"), log, "worker", "10"],
          stopTimeoutMs: 5_000,
        },
      ],
    });
    // Both have their SIGTERM handlers in place.
    await expect.poll(() => exists(`${log}.web`) && exists(`${log}.worker`)).toBe(true);
    await supervisor.stop();
    expect((await readFile(log, "utf8")).trim().split("\n")).toEqual([
      "web got SIGTERM",
      "web exits",
      "worker got SIGTERM",
      "worker exits",
    ]);
    expect(seen.events.some((e) => e.kind === "restart-scheduled")).toBe(false);
  });

  it("kills a child that does not stop in its time", async () => {
    const ready = path.join(dir, "stubborn.ready");
    const seen = collect();
    const lines: string[] = [];
    const supervisor = supervise({
      cwd: dir,
      env: process.env,
      log: (line) => lines.push(line),
      onEvent: seen.onEvent,
      children: [
        { name: "worker", args: [path.join(dir, "stubborn.mjs"), ready], stopTimeoutMs: 200 },
      ],
    });
    await expect.poll(() => exists(ready)).toBe(true);
    await supervisor.stop();
    expect(seen.events.at(-1)).toMatchObject({ kind: "exited", signal: "SIGKILL" });
    expect(lines).toContain("worker did not stop in 200 ms; killing it");
  });
});
