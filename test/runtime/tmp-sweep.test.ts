import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseSwept, tmpSweepCommand } from "../../worker/instances/tmp-sweep.ts";

// The temporary-file sweeper (issue 50, decision 0224) on a plain folder: the same script and
// arguments the worker runs in a gateway container, here with the host's sh. Ages are set by
// mtimes (no waiting); a live folder is one a running process works in.

const run = promisify(execFile);
const HOUR = 3600;
let root: string;
let holder: ChildProcess | undefined;

/** Sets a path's mtime `seconds` ago (a folder's, after its files). */
async function age(p: string, seconds: number) {
  const t = Date.now() / 1000 - seconds;
  await utimes(p, t, t);
}

async function folder(name: string, ageSeconds: number) {
  const dir = path.join(root, name);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, "blob"), "x".repeat(1024));
  await age(path.join(dir, "blob"), ageSeconds);
  await age(dir, ageSeconds);
  return dir;
}

describe("tmp sweep", () => {
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "tmp-sweep-"));
  });
  afterAll(async () => {
    holder?.kill();
    await rm(root, { recursive: true, force: true });
  });

  it("removes OpenClaw's stale folders and old logs, leaves live ones and everything else", async () => {
    await folder("openclaw-update-pack-a1B2c3", 2 * HOUR); // stale
    await folder(".openclaw-gateway-tls-key-x9Y8z7", 2 * HOUR); // stale
    await folder("openclaw-marketplace-Qw3rTy", 60); // changed a minute ago
    const held = await folder("openclaw-git-operation-Zx12Cv", 2 * HOUR);
    await folder("openclaw-state-locks-1000", 2 * HOUR); // OpenClaw's for its whole run
    await folder(".openclaw-terminal-staging-1000", 2 * HOUR);
    await folder("node-compile-cache", 2 * HOUR); // the image's
    await folder("agent-download", 2 * HOUR); // the agent's own
    // A folder with an old mtime but a file changed just now is not stale.
    const fresh = await folder("openclaw-npm-cache-Fr3sh1", 2 * HOUR);
    await writeFile(path.join(fresh, "new"), "y");
    await age(fresh, 2 * HOUR);
    // OpenClaw's own temporary folder: its folders by age, its dated logs after a week.
    await folder("openclaw/stage-sandbox-media-Ab12Cd", 2 * HOUR);
    await writeFile(path.join(root, "openclaw", "openclaw-2026-11-01.log"), "old");
    await age(path.join(root, "openclaw", "openclaw-2026-11-01.log"), 8 * 24 * HOUR);
    await writeFile(path.join(root, "openclaw", "openclaw-2026-12-05.log"), "today");
    await age(path.join(root, "openclaw"), 8 * 24 * HOUR);

    // A process working in a folder holds it (its cwd is set before 'spawn' fires).
    holder = spawn("tail", ["-f", "/dev/null"], { cwd: held, stdio: "ignore" });
    await new Promise((resolve, reject) => holder?.once("spawn", resolve).once("error", reject));

    const [file, ...args] = tmpSweepCommand([root, path.join(root, "missing")]);
    const { stdout } = await run(file as string, args);
    expect(
      parseSwept(stdout)
        .map((p) => path.relative(root, p))
        .sort(),
    ).toEqual([
      ".openclaw-gateway-tls-key-x9Y8z7",
      "openclaw-update-pack-a1B2c3",
      "openclaw/openclaw-2026-11-01.log",
      "openclaw/stage-sandbox-media-Ab12Cd",
    ]);
    expect((await readdir(root)).sort()).toEqual([
      ".openclaw-terminal-staging-1000",
      "agent-download",
      "node-compile-cache",
      "openclaw",
      "openclaw-git-operation-Zx12Cv",
      "openclaw-marketplace-Qw3rTy",
      "openclaw-npm-cache-Fr3sh1",
      "openclaw-state-locks-1000",
    ]);
    expect(await readdir(path.join(root, "openclaw"))).toEqual(["openclaw-2026-12-05.log"]);

    // Once the process is gone, the held folder is stale too.
    holder.kill();
    await new Promise((resolve) => holder?.once("exit", resolve));
    const again = await run(file as string, args);
    expect(parseSwept(again.stdout).map((p) => path.basename(p))).toEqual([
      "openclaw-git-operation-Zx12Cv",
    ]);
  });
});
