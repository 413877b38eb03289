import { readFile } from "node:fs/promises";
import { gatewayHealthy } from "../app/server/openclaw/health.server.ts";
import type { DockerRuntime } from "../worker/runtime/docker.ts";
import { cgroupMemory, procMeminfo } from "./density-host.ts";
import { containerSmaps, type KindFigures, type MappingKind } from "./smaps.ts";

// `BENCH_GATEWAY_FREEZE=1 npm run bench:gateway-memory` (issue 53, decisions 0222, 0232): what a
// gateway that is about to sleep holds, by kind of mapping, and what one lever cuts: a full
// garbage collection of the gateway's main process just before the freeze, asked through Node's
// inspector (SIGUSR1 opens it on the container's loopback; HeapProfiler.collectGarbage). Each
// state is read awake (what a freeze would push to swap: everything above the 32 MiB it keeps)
// and, where the host's swap has room, frozen as the platform freezes it (pause, limit lowered
// to 32 MiB) with the compressed pool's growth and the thaw to /healthz beside it. A
// measurement, not the platform.

const FLOOR = 32 * 1024 ** 2;
const mib = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MiB`;
const load = async () => (await readFile("/proc/loadavg", "utf8")).split(" ").slice(0, 3).join(" ");

/** The gateway's main process inside the container: the node process with the most RSS. */
async function gatewayPid(rt: DockerRuntime, id: string): Promise<string> {
  const { stdout } = await rt.exec(id, [
    "sh",
    "-c",
    "for d in /proc/[0-9]*; do echo \"$(basename $d) $(grep -E '^(Name|VmRSS):' $d/status 2>/dev/null | tr '\\n' ' ')\"; done",
  ]);
  let best = { pid: "", rss: -1 };
  for (const line of stdout.split("\n")) {
    const m = /^(\d+) Name:\s+(\S+).*VmRSS:\s+(\d+) kB/.exec(line);
    if (m?.[2] && /^(node|openclaw)/.test(m[2]) && Number(m[3]) > best.rss) {
      best = { pid: m[1] as string, rss: Number(m[3]) };
    }
  }
  if (!best.pid) throw new Error("no gateway process found");
  return best.pid;
}

/** One full GC of the gateway's main process through its inspector. */
async function collectGarbage(rt: DockerRuntime, id: string): Promise<void> {
  const pid = await gatewayPid(rt, id);
  await rt.exec(id, ["kill", "-USR1", pid]);
  const script = `
    const deadline = Date.now() + 10000;
    const list = async () => { for (;;) { try { return await (await fetch("http://127.0.0.1:9229/json/list")).json(); } catch (e) { if (Date.now() > deadline) throw e; await new Promise(r => setTimeout(r, 200)); } } };
    const [target] = await list();
    const ws = new WebSocket(target.webSocketDebuggerUrl);
    ws.onopen = () => ws.send(JSON.stringify({ id: 1, method: "HeapProfiler.collectGarbage" }));
    ws.onmessage = (m) => { if (JSON.parse(m.data).id === 1) { ws.close(); process.exit(0); } };
    setTimeout(() => process.exit(2), 30000);`;
  const { exitCode } = await rt.exec(id, ["node", "--input-type=module", "-e", script]);
  if (exitCode !== 0) throw new Error(`the inspector's GC failed (${exitCode})`);
}

/** The gateway's threads (its main process's), read from /proc inside the container. */
async function threadsOf(rt: DockerRuntime, id: string): Promise<number> {
  const pid = await gatewayPid(rt, id);
  const { stdout } = await rt.exec(id, ["sh", "-c", `grep '^Threads:' /proc/${pid}/status`]);
  return Number(/(\d+)/.exec(stdout)?.[1] ?? 0);
}

function kindLines(kinds: Map<MappingKind, KindFigures>): string[] {
  return [...kinds.entries()].map(
    ([kind, f]) =>
      `  ${kind.padEnd(30)} resident ${mib(f.rss).padStart(8)}  in swap ${mib(f.swap).padStart(8)}  (${f.mappings} mappings)`,
  );
}

/** Awake: resident by kind, threads; what a freeze would push out is all of it above the floor. */
async function awakeProfile(rt: DockerRuntime, id: string, label: string): Promise<string[]> {
  const m = await cgroupMemory(id);
  const threads = await threadsOf(rt, id);
  return [
    `${label}, awake: ${mib(m?.resident ?? 0)} resident (a freeze pushes ~${mib(Math.max(0, (m?.resident ?? 0) - FLOOR))} to swap), ${threads} threads in the gateway (load ${await load()})`,
    ...kindLines(await containerSmaps(id)),
  ];
}

/** Thaw to /healthz answering again: the wake's first step (a chat then pages in the rest). */
async function thawMs(rt: DockerRuntime, id: string, address: string | undefined) {
  const t = Date.now();
  await rt.start(id); // a thaw
  if (address) {
    while (!(await gatewayHealthy(`${address}:18789`, 2_000))) {
      if (Date.now() - t > 60_000) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return Date.now() - t;
}

/** Frozen as the platform freezes it: what stays, what went to swap, the pool's growth, the thaw. */
async function frozenProfile(rt: DockerRuntime, id: string, label: string): Promise<string[]> {
  const before = await procMeminfo.read();
  try {
    await rt.freeze?.(id, FLOOR);
  } catch (error) {
    return [
      `${label}, frozen: refused (${(error as Error).message.split("\n")[0]?.slice(0, 160)}); swap free ${mib(before.swapFreeBytes)} of ${mib(before.swapTotalBytes)}`,
    ];
  }
  const m = await cgroupMemory(id);
  const after = await procMeminfo.read();
  const kinds = await containerSmaps(id);
  const address = (await rt.inspect(id))?.address;
  const wakeMs = await thawMs(rt, id, address);
  return [
    `${label}, frozen: resident ${mib(m?.resident ?? 0)}, in swap ${mib(m?.swap ?? 0)}, zswap pool +${mib(after.zswapPoolBytes - before.zswapPoolBytes)}; thaw to /healthz ${(wakeMs / 1000).toFixed(2)} s (load ${await load()})`,
    ...kindLines(kinds),
  ];
}

/**
 * One clean freeze per gateway: a thawed gateway pages back in lazily, so a second freeze of the
 * same one moves little and its pool growth says nothing. `lever` "gc": a full GC through the
 * inspector first (compare with a run without it, on a fresh gateway).
 */
export async function freezeLever(
  rt: DockerRuntime,
  id: string,
  lever: "none" | "gc" = "none",
): Promise<string[]> {
  const lines = await awakeProfile(rt, id, "as the platform leaves it");
  let label = "as the platform leaves it";
  if (lever === "gc") {
    const t = Date.now();
    await collectGarbage(rt, id);
    lines.push(`full GC through the inspector: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    label = "after a full GC";
    lines.push(...(await awakeProfile(rt, id, label)));
  }
  lines.push(...(await frozenProfile(rt, id, label)));
  return lines;
}
