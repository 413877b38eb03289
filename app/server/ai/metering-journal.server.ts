import { randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import path from "node:path";
import { env } from "../platform/env.server.ts";

// The metered calls a process has answered but not yet written (decision 0245). Usage is
// written after the answer, in batches (decision 0025): a process killed before its batch
// committed lost calls it had answered and the provider had billed (the soak's ledger drift,
// issue 52). Each call is appended here when metered and marked done once its batch commits;
// a process that starts takes over the journals of processes no longer alive and writes what
// they had not. A line is in the page cache once written: it outlives a killed process, not a
// host that loses power (no fsync per call).
//
// One file per process, `<pid>.<random>.jsonl` in DATA_DIR/metering. Taking one over renames it
// to the taker's pid first (atomic: one taker wins); a taker that dies leaves it to the next.

export interface JournalCall<R> {
  id: string;
  at: string;
  record: R;
}

type Line<R> = { call: JournalCall<R> } | { done: string[] };

/** Compacted past this size, when there are calls in flight (else emptied). */
const COMPACT_BYTES = 4 * 1024 ** 2;

const folder = () => path.resolve(env().DATA_DIR, "metering");
const pidOf = (name: string) => Number(name.split(".")[0]);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

export class MeteringJournal<R> {
  #file: string | undefined;
  #fd: number | undefined;

  #open(): number {
    if (this.#fd !== undefined) return this.#fd;
    mkdirSync(folder(), { recursive: true });
    this.#file = path.join(folder(), `${process.pid}.${randomBytes(4).toString("hex")}.jsonl`);
    this.#fd = openSync(this.#file, "a");
    return this.#fd;
  }

  #write(line: Line<R>): void {
    writeSync(this.#open(), `${JSON.stringify(line)}\n`);
  }

  append(call: JournalCall<R>): void {
    this.#write({ call });
  }

  /** Calls written: marked done. Nothing when this journal holds none (recovered calls). */
  done(ids: string[]): void {
    if (ids.length > 0 && this.#fd !== undefined) this.#write({ done: ids });
  }

  /** The file, once the first call opened it. */
  get file(): string | undefined {
    return this.#file;
  }

  /**
   * After a batch: with nothing in flight the file is emptied; past COMPACT_BYTES it is
   * rewritten with the calls still in flight only.
   */
  compact(pending: Array<JournalCall<R>>): void {
    if (this.#fd === undefined || !this.#file) return;
    if (pending.length === 0) {
      ftruncateSync(this.#fd, 0);
      return;
    }
    if (fstatSync(this.#fd).size < COMPACT_BYTES) return;
    const next = `${this.#file}.next`;
    const fd = openSync(next, "w");
    try {
      for (const call of pending) writeSync(fd, `${JSON.stringify({ call })}\n`);
    } finally {
      closeSync(fd);
    }
    renameSync(next, this.#file);
    closeSync(this.#fd);
    // Appending again: a later truncation must put the next line at the start, not past a hole.
    this.#fd = openSync(this.#file, "a");
  }

  /** Journals of processes that are gone, each taken over (renamed to this process's pid). */
  static orphans<R>(): Array<{ file: string; calls: Array<JournalCall<R>> }> {
    let names: string[];
    try {
      names = readdirSync(folder());
    } catch {
      return [];
    }
    const taken: Array<{ file: string; calls: Array<JournalCall<R>> }> = [];
    for (const name of names) {
      const pid = pidOf(name);
      if (!name.endsWith(".jsonl") || !Number.isInteger(pid) || pid === process.pid || alive(pid)) {
        continue;
      }
      const file = path.join(folder(), `${process.pid}.${name.split(".").slice(1).join(".")}`);
      try {
        renameSync(path.join(folder(), name), file);
      } catch {
        continue; // another process took it
      }
      taken.push({ file, calls: pendingIn<R>(readFileSync(file, "utf8")) });
    }
    return taken;
  }

  /** A journal taken over whose calls are all written. */
  static finished(file: string): void {
    rmSync(file, { force: true });
  }
}

/** The calls of a journal's text not marked done (a torn last line is skipped). */
export function pendingIn<R>(text: string): Array<JournalCall<R>> {
  const calls = new Map<string, JournalCall<R>>();
  for (const raw of text.split("\n")) {
    if (!raw) continue;
    let line: Line<R>;
    try {
      line = JSON.parse(raw) as Line<R>;
    } catch {
      continue;
    }
    if ("call" in line) calls.set(line.call.id, line.call);
    else for (const id of line.done) calls.delete(id);
  }
  return [...calls.values()];
}
