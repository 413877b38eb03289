import type { DockerRuntime } from "../worker/runtime/docker.ts";
import { cgroupMemory, procMeminfo } from "./density-host.ts";
import { containerSmaps } from "./smaps.ts";

// `BENCH_GATEWAY_FREEZE=1 npm run bench:gateway-memory` (issue 53, decision 0222): what a frozen
// gateway keeps and has in swap, by kind of mapping, frozen as the platform freezes it (pause,
// limit lowered to 32 MiB), then the same after one lever: a full garbage collection of the
// gateway's main process just before the freeze, asked through Node's inspector (SIGUSR1 opens
// it on the container's loopback; HeapProfiler.collectGarbage). A measurement, not the platform.

const FLOOR = 32 * 1024 ** 2;
const mib = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MiB`;

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

async function frozenProfile(rt: DockerRuntime, id: string, label: string): Promise<string[]> {
  const before = await procMeminfo.read();
  const awake = await cgroupMemory(id);
  await rt.freeze?.(id, FLOOR);
  const m = await cgroupMemory(id);
  const after = await procMeminfo.read();
  const kinds = await containerSmaps(id);
  await rt.start(id); // a thaw
  const lines = [
    `${label}: awake ${mib(awake?.resident ?? 0)} → frozen: resident ${mib(m?.resident ?? 0)}, in swap ${mib(m?.swap ?? 0)}, zswap pool +${mib(after.zswapPoolBytes - before.zswapPoolBytes)}`,
  ];
  for (const [kind, f] of kinds) {
    lines.push(
      `  ${kind.padEnd(30)} resident ${mib(f.rss).padStart(8)}  in swap ${mib(f.swap).padStart(8)}`,
    );
  }
  return lines;
}

/** Freeze as is, then GC + freeze; the printed lines. */
export async function freezeLever(rt: DockerRuntime, id: string): Promise<string[]> {
  const lines = await frozenProfile(rt, id, "frozen as the platform freezes it");
  await new Promise((r) => setTimeout(r, 5_000)); // thawed and idle again
  const t = Date.now();
  await collectGarbage(rt, id);
  lines.push(`full GC through the inspector: ${((Date.now() - t) / 1000).toFixed(1)} s`);
  lines.push(...(await frozenProfile(rt, id, "frozen after the GC")));
  return lines;
}
