import { readFile } from "node:fs/promises";

// What a gateway keeps resident and what it has in swap, by kind of mapping (issue 53, decision
// 0222): read from /proc/<pid>/smaps of every process in a Docker container's cgroup (v1), as
// root on the engine's host. Kinds: the V8 heap and other anonymous memory, malloc's [heap],
// code (file-backed, executable), other mapped files, stacks.

export type MappingKind =
  | "anonymous (V8 heap, buffers)"
  | "[heap] (malloc)"
  | "code (file, r-x)"
  | "other mapped files"
  | "stacks"
  | "other";

export interface KindFigures {
  rss: number;
  swap: number;
  mappings: number;
}

function kindOf(perms: string, path: string): MappingKind {
  if (path === "[heap]") return "[heap] (malloc)";
  if (path.startsWith("[stack")) return "stacks";
  if (path === "" || path.startsWith("[anon")) return "anonymous (V8 heap, buffers)";
  if (path.startsWith("/")) return perms.includes("x") ? "code (file, r-x)" : "other mapped files";
  return "other";
}

/** Sums Rss and Swap of one process's mappings by kind into `into`. */
export function addSmaps(text: string, into: Map<MappingKind, KindFigures>): void {
  let kind: MappingKind = "other";
  for (const line of text.split("\n")) {
    const header = /^[0-9a-f]+-[0-9a-f]+\s+(\S+)\s+\S+\s+\S+\s+\S+\s*(.*)$/.exec(line);
    if (header) {
      kind = kindOf(header[1] ?? "", (header[2] ?? "").trim());
      const f = into.get(kind) ?? { rss: 0, swap: 0, mappings: 0 };
      f.mappings += 1;
      into.set(kind, f);
      continue;
    }
    const field = /^(Rss|Swap):\s+(\d+) kB/.exec(line);
    if (!field) continue;
    const f = into.get(kind) as KindFigures;
    if (field[1] === "Rss") f.rss += Number(field[2]) * 1024;
    else f.swap += Number(field[2]) * 1024;
  }
}

/** The container's processes' mappings by kind (host pids from its cgroup v1 directory). */
export async function containerSmaps(containerId: string): Promise<Map<MappingKind, KindFigures>> {
  const procs = await readFile(`/sys/fs/cgroup/memory/docker/${containerId}/cgroup.procs`, "utf8");
  const kinds = new Map<MappingKind, KindFigures>();
  for (const pid of procs.split("\n").filter(Boolean)) {
    const text = await readFile(`/proc/${pid}/smaps`, "utf8").catch(() => "");
    addSmaps(text, kinds);
  }
  return kinds;
}
