import { type ChildProcess, spawn } from "node:child_process";

// `npm start` runs the web and the worker as child processes. A child that dies on its own is
// started again after a back-off (so a crash loop does not spin the CPU); only stop() ends them,
// one after another in the order given, each waited for before the next gets its signal.

export interface ChildSpec {
  name: string;
  /** Arguments to `node` (the script and its flags). */
  args: string[];
  /** How long the child may take to stop after SIGTERM before it is killed. */
  stopTimeoutMs: number;
}

export interface SupervisorOptions {
  children: ChildSpec[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
  /** First restart delay; doubled after each quick crash up to maxBackoffMs. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** A child that ran this long before it died is restarted after initialBackoffMs again. */
  healthyAfterMs?: number;
  /** Called on every (re)start and exit; tests wait on these instead of sleeping. */
  onEvent?: (event: SupervisorEvent) => void;
}

export type SupervisorEvent =
  | { kind: "started"; name: string; pid: number; restarts: number }
  | { kind: "exited"; name: string; code: number | null; signal: string | null }
  | { kind: "restart-scheduled"; name: string; delayMs: number };

interface Slot {
  spec: ChildSpec;
  child?: ChildProcess;
  restarts: number;
  backoffMs: number;
  startedAt: number;
  timer?: NodeJS.Timeout;
}

export interface Supervisor {
  /** Stops the children in the order they were given (web first, so no request arrives at a stopped worker). */
  stop(): Promise<void>;
}

export function supervise(options: SupervisorOptions): Supervisor {
  const initial = options.initialBackoffMs ?? 1_000;
  const max = options.maxBackoffMs ?? 30_000;
  const healthyAfter = options.healthyAfterMs ?? 60_000;
  const emit = options.onEvent ?? (() => {});
  let stopping = false;

  const slots = options.children.map(
    (spec): Slot => ({ spec, restarts: 0, backoffMs: initial, startedAt: 0 }),
  );

  function start(slot: Slot) {
    const child = spawn(process.execPath, slot.spec.args, {
      cwd: options.cwd,
      stdio: "inherit",
      env: options.env,
    });
    slot.child = child;
    slot.startedAt = Date.now();
    if (child.pid !== undefined) {
      emit({ kind: "started", name: slot.spec.name, pid: child.pid, restarts: slot.restarts });
    }
    child.on("exit", (code, signal) => {
      slot.child = undefined;
      emit({ kind: "exited", name: slot.spec.name, code, signal });
      if (stopping) return;
      if (Date.now() - slot.startedAt >= healthyAfter) slot.backoffMs = initial;
      const delayMs = slot.backoffMs;
      slot.backoffMs = Math.min(slot.backoffMs * 2, max);
      slot.restarts += 1;
      options.log(
        `${slot.spec.name} exited unexpectedly (${signal ?? `code ${code}`}); restarting in ${delayMs} ms (restart ${slot.restarts})`,
      );
      emit({ kind: "restart-scheduled", name: slot.spec.name, delayMs });
      slot.timer = setTimeout(() => {
        slot.timer = undefined;
        if (!stopping) start(slot);
      }, delayMs);
    });
  }

  function stopOne(slot: Slot): Promise<void> {
    if (slot.timer) clearTimeout(slot.timer);
    const child = slot.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const kill = setTimeout(() => {
        options.log(`${slot.spec.name} did not stop in ${slot.spec.stopTimeoutMs} ms; killing it`);
        child.kill("SIGKILL");
      }, slot.spec.stopTimeoutMs);
      child.once("exit", () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill("SIGTERM");
    });
  }

  for (const slot of slots) start(slot);

  return {
    async stop() {
      if (stopping) return;
      stopping = true;
      for (const slot of slots) {
        if (slot.child) options.log(`stopping ${slot.spec.name}`);
        await stopOne(slot);
      }
    },
  };
}

/**
 * Runs `stop` once on SIGTERM or SIGINT. Under `npm start` (START_SUPERVISED=1) a terminal's
 * Ctrl-C reaches every process of the group at once, so a child leaves SIGINT to the supervisor,
 * which stops the children one by one with SIGTERM.
 */
export function onStopSignal(stop: (signal: NodeJS.Signals) => void): void {
  const supervised = process.env.START_SUPERVISED === "1";
  let stopping = false;
  const once = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    stop(signal);
  };
  process.on("SIGTERM", once);
  process.on("SIGINT", supervised ? () => {} : once);
}
