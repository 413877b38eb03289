import { readFileSync } from "node:fs";

// The process's limit on open file descriptors (RLIMIT_NOFILE). Every open socket (a live agent
// socket, an event stream, a kept-alive request) holds one, so it bounds the connections one web
// process can hold. Node raises its own soft limit to the hard limit when it starts (measured:
// `ulimit -Sn 1024; node` runs with soft = hard; docs/decisions/0220-live-socket-caps.md), so
// what an operator sets is the hard limit (systemd LimitNOFILE, docker --ulimit nofile;
// docs/operations.md). Linux only: elsewhere the limit is unknown.

export interface OpenFilesLimit {
  soft: number;
  hard: number;
}

/** Below this many descriptors the web warns at start: 10,000 sockets and their margin. */
export const WEB_OPEN_FILES_WANTED = 16_384;

/** The "Max open files" row of a /proc/<pid>/limits text ("unlimited" as Infinity). */
export function parseOpenFilesLimit(limits: string): OpenFilesLimit | undefined {
  const row = /^Max open files\s+(\S+)\s+(\S+)/m.exec(limits);
  if (!row) return undefined;
  const value = (text: string) => (text === "unlimited" ? Number.POSITIVE_INFINITY : Number(text));
  const soft = value(row[1] as string);
  const hard = value(row[2] as string);
  return Number.isNaN(soft) || Number.isNaN(hard) ? undefined : { soft, hard };
}

/** This process's limit (or another's, by pid), undefined where /proc is not there. */
export function openFilesLimit(pid: number | "self" = "self"): OpenFilesLimit | undefined {
  try {
    return parseOpenFilesLimit(readFileSync(`/proc/${pid}/limits`, "utf8"));
  } catch {
    return undefined;
  }
}
