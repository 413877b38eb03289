import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { root } from "../servers.ts";
import { stopEngineFor } from "./engine-stop.ts";
import type { Platform } from "./platform.ts";
import { type Recorder, stamp } from "./record.ts";
import { fillDisk, oomKill } from "./resource-faults.ts";
import { LiveSocket } from "./turns.ts";
import type { SoakUser } from "./users.ts";

// The chaos loop: faults spread over the middle third of the run, each logged with its time.
// The Docker engine is stopped only with SOAK_ENGINE_CHAOS=1 (it stops every container on the
// engine, other people's too: decision 0218).

const run = promisify(execFile);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ChaosEvent {
  at: number;
  name: string;
  detail: string;
}

type Fault = { name: string; act: () => Promise<string> };

async function containerOf(p: Platform, user: SoakUser): Promise<string | undefined> {
  const [row] = await p.sql<{ container_id: string | null }[]>`
    select container_id from instances where user_id = ${user.id}`;
  return row?.container_id ?? undefined;
}

async function running(id: string): Promise<boolean> {
  const { stdout } = await run("docker", [
    "inspect",
    "--format",
    "{{.State.Running}} {{.State.Paused}}",
    id,
  ]).catch(() => ({ stdout: "" }));
  return stdout.trim() === "true false";
}

/** Host pids of every process in the container (`docker top`), to freeze them all. */
async function containerPids(id: string): Promise<number[]> {
  const { stdout } = await run("docker", ["top", id, "-eo", "pid"]);
  return stdout
    .split("\n")
    .slice(1)
    .map((l) => Number(l.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

export function faults(p: Platform, rec: Recorder, users: SoakUser[]): Fault[] {
  const talker = users.find((u) => u.role === "talker") ?? users[0];
  const victim = users.find((u) => u.role === "small-balance") ?? talker;
  // Another agent than the one killed mid-turn where there is one (four agents: two talkers).
  const lastTalker = users.filter((u) => u.role === "talker").at(-1) ?? talker;
  const lifecycleUser = users.find((u) => u.role === "lifecycle") ?? talker;
  const killChild = (name: "web" | "worker") => async () => {
    const pid = await p.childPid(name);
    if (!pid) return `no ${name} process running`;
    process.kill(pid, "SIGKILL");
    return `kill -9 ${name} pid ${pid}`;
  };
  const list: Fault[] = [
    { name: "worker kill -9", act: killChild("worker") },
    {
      name: "gateway kill mid-turn",
      act: async () => {
        if (!talker) return "no agent";
        const id = await containerOf(p, talker);
        if (!id) return "no container";
        const socket = new LiveSocket(p.url, talker);
        const turn = socket.chat(rec);
        await pause(800);
        await run("docker", ["kill", id]).catch(() => {});
        void turn.finally(() => socket.close());
        return `docker kill ${id.slice(0, 12)} (${talker.id}) during a socket turn`;
      },
    },
    { name: "web kill -9", act: killChild("web") },
    {
      name: "gateway OOM-killed mid-turn",
      act: async () => {
        if (!lastTalker) return "no agent";
        const id = await containerOf(p, lastTalker);
        if (!id) return "no container";
        const socket = new LiveSocket(p.url, lastTalker);
        const turn = socket.chat(rec);
        await pause(800);
        const detail = await oomKill(id);
        void turn.finally(() => socket.close());
        return `${id.slice(0, 12)} (${lastTalker.id}) during a socket turn: ${detail}`;
      },
    },
    {
      name: p.embedded ? "embedded postgres killed" : "postgres restart",
      act: async () => {
        const t = Date.now();
        await p.restartDatabase(3000);
        const how = p.embedded ? "killed, started again by npm start" : "stopped (fast), started";
        return `${how}: answering again after ${Date.now() - t} ms`;
      },
    },
    {
      name: "agent disk filled",
      act: async () => {
        // An agent whose gateway container runs (an exec needs one); the faults before may have
        // left every gateway restarting: waited for up to 90 s.
        const until = Date.now() + 90_000;
        let user: SoakUser | undefined;
        let id: string | undefined;
        while (!id && Date.now() < until) {
          for (const u of [lifecycleUser, talker, lastTalker, victim]) {
            const c = u && (await containerOf(p, u));
            if (c && (await running(c))) {
              user = u;
              id = c;
              break;
            }
          }
          if (!id) await pause(2000);
        }
        if (!user || !id) return "no agent's gateway ran within 90 s";
        return `${id.slice(0, 12)} (${user.id}): ${await fillDisk(rec, p.url, user, id)}`;
      },
    },
    {
      name: "gateway SIGSTOP 30 s",
      act: async () => {
        if (!victim) return "no agent";
        const id = await containerOf(p, victim);
        if (!id) return "no container";
        const pids = await containerPids(id).catch(() => []);
        for (const pid of pids) process.kill(pid, "SIGSTOP");
        const socket = new LiveSocket(p.url, victim);
        void socket.chat(rec, "2000/1000").finally(() => socket.close());
        await pause(30_000);
        for (const pid of pids) {
          try {
            process.kill(pid, "SIGCONT");
          } catch {
            // replaced meanwhile: nothing left to thaw
          }
        }
        return `${pids.length} processes of ${id.slice(0, 12)} (${victim.id}) frozen 30 s, then thawed`;
      },
    },
  ];
  if (process.env.SOAK_ENGINE_CHAOS === "1") {
    list.push({
      name: "engine stopped 30 s",
      act: () => stopEngineFor(30_000, root),
    });
  }
  return list;
}

/** Runs the faults one after another between `from` and `to`; returns the log. */
export async function chaos(
  list: Fault[],
  rec: Recorder,
  from: number,
  to: number,
  log: (line: string) => void,
): Promise<ChaosEvent[]> {
  const events: ChaosEvent[] = [];
  const gap = (to - from) / list.length;
  for (const [i, fault] of list.entries()) {
    const due = from + i * gap;
    if (due > Date.now()) await pause(due - Date.now());
    const at = Date.now();
    log(`${stamp(rec)} chaos: ${fault.name}`);
    const detail = await fault.act().catch((error: unknown) => `failed: ${error}`);
    events.push({ at, name: fault.name, detail });
    log(`${stamp(rec)} chaos: ${fault.name}: ${detail}`);
  }
  return events;
}
