import { createServer, type Server } from "node:http";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import { recordEngineCheck } from "../../app/server/agents/engine-health.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { stopBoss } from "../../app/server/platform/jobs.server.ts";
import { setHostMemorySource } from "../../worker/instances/memory-pressure.ts";
import { restartInstanceJob } from "../../worker/jobs/restart-instance.ts";
import { type AgentRuntime, type ContainerInfo, setRuntime } from "../../worker/runtime/index.ts";
import { ensureUser } from "../helpers/users.ts";

// A stand-in container engine for the boot-slot tests (decisions 0240, 0241): no gateway boots.
// Its containers "boot" when started and answer /healthz (a loopback server each) when the test
// says so; it records how many boot at once and in which order.

const IMAGE = "agent-gateway:standin";
const IMAGE_ID = "sha256:standin";

export interface StandInContainer {
  id: string;
  name: string;
  running: boolean;
  startedAt: string | undefined;
  finishedAt: string | undefined;
  /** Its /healthz, answering 200 once `healthy`. */
  server: Server;
  endpoint: string;
  healthy: boolean;
  /** A start the engine refuses (a job that dies mid-boot). */
  refuseStart?: boolean;
  /** How it last ended (0: a clean stop). */
  exitCode: number;
  /** Its restart policy, as the engine holds it (gateways made before 0241: on-failure). */
  restartPolicy: string;
}

/** The stand-in engine: containers by name and id, and the order in which they were started. */
export class StandInEngine {
  readonly containers = new Map<string, StandInContainer>();
  readonly started: string[] = [];
  /** Containers started and not yet healthy: the boots in flight. */
  readonly booting = new Set<string>();
  peak = 0;

  async add(name: string): Promise<StandInContainer> {
    const server = createServer((req, res) => {
      res.statusCode = req.url === "/healthz" && c.healthy ? 200 : 503;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    const c: StandInContainer = {
      id: `ctr_${name}`,
      name,
      running: true,
      startedAt: new Date(Date.now() - 3_600_000).toISOString(),
      finishedAt: undefined,
      server,
      endpoint: `127.0.0.1:${port}`,
      healthy: true,
      exitCode: 0,
      restartPolicy: "on-failure",
    };
    this.containers.set(name, c);
    return c;
  }

  find(nameOrId: string) {
    return [...this.containers.values()].find((c) => c.name === nameOrId || c.id === nameOrId);
  }

  /** The engine's shutdown stops every container (exit 0: a clean stop by SIGTERM). */
  stopAll() {
    for (const c of this.containers.values()) {
      c.running = false;
      c.healthy = false;
      c.finishedAt = new Date().toISOString();
    }
  }

  /** The gateway exits by itself with `code`; with policy `no` the engine leaves it down. */
  crash(name: string, code: number) {
    const c = this.find(name) as StandInContainer;
    c.running = false;
    c.healthy = false;
    c.exitCode = code;
    c.finishedAt = new Date().toISOString();
  }

  /** The booted gateway answers /healthz: its boot is over. */
  healthy(name: string) {
    const c = this.find(name) as StandInContainer;
    c.healthy = true;
    this.booting.delete(name);
  }

  info(c: StandInContainer): ContainerInfo {
    return {
      id: c.id,
      name: c.name,
      image: IMAGE,
      imageId: IMAGE_ID,
      state: c.running ? "running" : "exited",
      running: c.running,
      health: undefined,
      oomKilled: false,
      exitCode: c.exitCode,
      restartCount: 0,
      startedAt: c.startedAt,
      finishedAt: c.finishedAt,
      labels: {},
      address: undefined,
      endpoint: c.endpoint,
      ports: {},
      hostname: c.name,
      limits: { memoryBytes: 0, cpuShares: 0, nanoCpus: 0, pidsLimit: 0 },
      security: { init: true, capDrop: ["ALL"], securityOpt: [], readOnly: false },
      restartPolicy: c.restartPolicy,
      env: [],
      mounts: [],
    };
  }

  /** Only what reconcile and a restart call; anything else is undefined (an optional call). */
  runtime(): AgentRuntime {
    const driver = {
      driver: "docker",
      inspect: async (nameOrId: string) => {
        const c = this.find(nameOrId);
        return c ? this.info(c) : undefined;
      },
      start: async (id: string) => {
        const c = this.find(id) as StandInContainer;
        if (c.refuseStart) throw new Error("the engine refused the start");
        c.running = true;
        c.startedAt = new Date().toISOString();
        this.started.push(c.name);
        this.booting.add(c.name);
        this.peak = Math.max(this.peak, this.booting.size);
      },
      // A stop by the platform (a user's stop, a sleep): exit 0, as SIGTERM ends a gateway.
      stop: async (id: string) => {
        const c = this.find(id) as StandInContainer;
        c.running = false;
        c.healthy = false;
        c.finishedAt = new Date().toISOString();
        this.booting.delete(c.name);
      },
      setRestartPolicy: async (id: string, policy: string) => {
        (this.find(id) as StandInContainer).restartPolicy = policy;
      },
      stats: async () => ({
        cpuPercent: 0,
        memoryBytes: 0,
        memoryLimitBytes: 0,
        pids: 1,
        rxBytes: 0,
        txBytes: 0,
      }),
      imageId: async () => IMAGE_ID,
      ensureNetwork: async () => ({ gatewayIp: undefined }),
      ensureVolume: async () => {},
      list: async () => [],
      exec: async () => ({ exitCode: 0, stdout: "", stderr: "" }),
    };
    return driver as unknown as AgentRuntime;
  }

  async close() {
    for (const c of this.containers.values()) {
      await new Promise<void>((resolve) => c.server.close(() => resolve()));
    }
  }
}

let users = 0;

/** A running instance whose gateway is one of the stand-in engine's containers. */
export async function runningInstance(engine: StandInEngine): Promise<InstanceRow> {
  const userId = `usr_stand_in_${++users}_${Date.now()}`;
  await ensureUser(userId);
  const row = await ensureInstanceRecord(userId);
  const c = await engine.add(row.container_name);
  return updateInstance(row.id, {
    container_id: c.id,
    image: IMAGE,
    image_id: IMAGE_ID,
    observed_state: "running",
    health: "healthy",
    observed_at: new Date(Date.now() - 60_000),
  });
}

/** The engine goes down (its containers stop with it) and comes back, as the watcher records. */
export async function engineRestart(engine: StandInEngine) {
  await recordEngineCheck(false, "no answer to ping");
  engine.stopAll();
  await recordEngineCheck(true);
}

/**
 * A test file's hooks: a fresh stand-in engine as the runtime for each test, one boot slot
 * (WAKE_CONCURRENCY 1, which a test may change), every wake fitting in memory, warm-ups queued.
 * After each test its instances are meant to be stopped, so the next test's reconcile passes
 * leave them alone.
 */
export function standInEngine(): { readonly engine: StandInEngine } {
  const current = {} as { engine: StandInEngine };
  beforeAll(() => {
    process.env.WAKE_CONCURRENCY = "1";
    // The host's memory is another test's matter (memory-pressure.test.ts): every wake fits.
    process.env.MEMORY_TIGHT_PERCENT = "0";
    // Warm-ups are queued after a boot (no worker runs them here).
    process.env.RUNTIME_COLD_WARMUP = "on";
    resetEnvCache();
  });
  beforeEach(() => {
    current.engine = new StandInEngine();
    setRuntime(current.engine.runtime());
  });
  afterEach(async () => {
    await db()`update instances set desired_state = 'stopped'`;
    setRuntime(undefined);
    setHostMemorySource(undefined);
    process.env.WAKE_CONCURRENCY = "1";
    process.env.MEMORY_TIGHT_PERCENT = "0";
    resetEnvCache();
    await current.engine.close();
  });
  afterAll(async () => {
    delete process.env.WAKE_CONCURRENCY;
    delete process.env.MEMORY_TIGHT_PERCENT;
    process.env.RUNTIME_COLD_WARMUP = "off";
    resetEnvCache();
    await stopBoss({ graceful: false });
  });
  return current;
}

/** The instance's observed state, as the row holds it. */
export const state = async (row: InstanceRow) => (await getInstance(row.id))?.observed_state;

/** A restart reconcile queued, run as the worker runs its job. */
export const restartJob = (row: InstanceRow) => restartInstanceJob({ instanceId: row.id });
