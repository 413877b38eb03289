import type Docker from "dockerode";
import type { DockerRuntime } from "./docker.ts";
import { ENGINE_CALL_BOUND_MS, call as engineCall } from "./docker-engine.ts";
import { networkNames } from "./swarm-networks.ts";
import {
  type ContainerInfo,
  type ContainerState,
  type ContainerSummary,
  NoCapacityError,
} from "./types.ts";

// The Swarm driver's services and tasks: manager calls, reading them, spec changes, task state.

export type Task = Docker.Task & {
  ID: string;
  NodeID?: string;
  DesiredState?: string;
  CreatedAt?: string;
  Status?: {
    State?: string;
    Err?: string;
    Message?: string;
    ContainerStatus?: { ContainerID?: string; ExitCode?: number };
  };
  NetworksAttachments?: Array<{ Network?: { Spec?: { Name?: string } }; Addresses?: string[] }>;
};

export type Service = {
  ID: string;
  /** Present once the service was updated (started): a never-started one is "created". */
  PreviousSpec?: ServiceSpec;
  Version?: { Index?: number };
  CreatedAt?: string;
  Spec?: ServiceSpec;
};

export type ServiceSpec = {
  Name?: string;
  Labels?: Record<string, string>;
  Mode?: { Replicated?: { Replicas?: number } };
  TaskTemplate?: {
    ContainerSpec?: {
      Image?: string;
      Hostname?: string;
      Env?: string[];
      Init?: boolean;
      CapabilityDrop?: string[];
      Privileges?: { NoNewPrivileges?: boolean };
      User?: string;
      ReadOnly?: boolean;
      Mounts?: Array<{ Type?: string; Source?: string; Target?: string }>;
      Hosts?: string[];
    };
    Resources?: {
      Limits?: { NanoCPUs?: number; MemoryBytes?: number; Pids?: number };
      Reservations?: { NanoCPUs?: number; MemoryBytes?: number };
    };
    RestartPolicy?: { Condition?: string };
    Placement?: { Constraints?: string[] };
    ForceUpdate?: number;
    Networks?: Array<{ Target?: string; Aliases?: string[] }>;
  };
};

const LIVE_TASK = new Set(["new", "pending", "assigned", "accepted", "preparing", "starting"]);
/**
 * The task's container runs: `running`, or `starting` with a container (a task whose image has
 * a HEALTHCHECK stays `starting` until it passes; the gateway's start period is 120 s).
 */
export const taskRuns = (t: Task | undefined) =>
  t?.Status?.State === "running" ||
  (t?.Status?.State === "starting" && !!t.Status.ContainerStatus?.ContainerID);

export const statusOf = (error: unknown) => (error as { statusCode?: number }).statusCode;

/**
 * A manager call, bounded as the Docker driver's are (a wedged manager that accepts and never
 * answers would otherwise hold an instance's lock for good).
 */
export const call = <T>(fn: () => Promise<T>): Promise<T> =>
  engineCall(fn, ENGINE_CALL_BOUND_MS, "Swarm manager");

const newest = (a: { CreatedAt?: string }, b: { CreatedAt?: string }) =>
  (b.CreatedAt ?? "").localeCompare(a.CreatedAt ?? "");

/** The node id a service is pinned to (its `node.id==…` constraint). */
export function pinnedNode(spec: ServiceSpec | undefined): string | undefined {
  for (const c of spec?.TaskTemplate?.Placement?.Constraints ?? []) {
    const m = /^node\.id\s*==\s*(\S+)$/.exec(c);
    if (m) return m[1];
  }
  return undefined;
}

/**
 * Runs a call naming a network made a moment ago (a gateway's own overlay): the manager
 * answers 404 "no such network" for a moment after creating one (more than ten seconds on a
 * loaded manager: seen in npm test), retried for a minute.
 */
export async function newNetworkRetried<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (let delay = 100; ; delay = Math.min(delay * 2, 1_000)) {
    try {
      return await call(fn);
    } catch (error) {
      const missing =
        statusOf(error) === 404 &&
        /no such network|network \S+ not found/i.test((error as Error).message);
      if (!missing || Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** A swarm's services and their tasks, through its manager; a task's container on its node. */
export class SwarmServices {
  readonly #docker: Docker;
  readonly #settleMs: number;
  readonly #engineOf: (nodeId: string) => Promise<DockerRuntime>;
  readonly #networkNames = new Map<string, string>();

  constructor(
    docker: Docker,
    settleMs: number,
    engineOf: (nodeId: string) => Promise<DockerRuntime>,
  ) {
    this.#docker = docker;
    this.#settleMs = settleMs;
    this.#engineOf = engineOf;
  }

  async get(id: string): Promise<Service | undefined> {
    try {
      return (await call(() => this.#docker.getService(id).inspect())) as Service;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  async tasks(serviceId: string): Promise<Task[]> {
    const tasks = (await call(() =>
      this.#docker.listTasks({ filters: { service: [serviceId] } }),
    )) as Task[];
    return tasks.sort(newest);
  }

  /** The task that counts now: the newest one meant to run, else the newest of all. */
  current(tasks: Task[]): Task | undefined {
    return tasks.find((t) => t.DesiredState === "running") ?? tasks[0];
  }

  async update(id: string, change: (spec: ServiceSpec) => void): Promise<Service> {
    const service = await this.get(id);
    if (!service?.Spec) throw new Error(`no such service: ${id}`);
    const spec = structuredClone(service.Spec);
    change(spec);
    await call(() =>
      this.#docker.getService(service.ID).update({ version: service.Version?.Index, ...spec }),
    );
    return service;
  }

  /** Waits until the service's current task runs (or, for `stopped`, none runs). */
  async settle(serviceId: string, want: "running" | "stopped", after?: string): Promise<void> {
    const deadline = Date.now() + this.#settleMs;
    let delay = 100;
    for (;;) {
      const tasks = await this.tasks(serviceId);
      if (want === "stopped") {
        const live = tasks.filter(
          (t) => t.Status?.State === "running" || LIVE_TASK.has(t.Status?.State ?? ""),
        );
        if (live.length === 0) return;
      } else {
        const t = tasks.find((x) => x.DesiredState === "running" && (!after || x.ID !== after));
        const state = t?.Status?.State;
        // Its container runs: what a start waits for, as with the Docker driver; health is
        // waited on by the caller.
        if (taskRuns(t)) return;
        if (t && state === "pending" && /insufficient resources/i.test(t.Status?.Err ?? "")) {
          throw new NoCapacityError(`No room on the instance's node: ${t.Status?.Err}`);
        }
        if (t && (state === "rejected" || state === "failed")) {
          throw new Error(`task ${state}: ${t.Status?.Err ?? t.Status?.Message ?? "unknown"}`);
        }
      }
      if (Date.now() > deadline) {
        throw new Error(`service ${serviceId} not ${want} after ${this.#settleMs} ms`);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 500);
    }
  }

  async mounting(volume: string): Promise<Service[]> {
    const services = (await call(() => this.#docker.listServices())) as Service[];
    return services.filter((s) =>
      (s.Spec?.TaskTemplate?.ContainerSpec?.Mounts ?? []).some((m) => m.Source === volume),
    );
  }

  /** The service's current task's container on its node, when it has one. */
  async container(
    id: string,
  ): Promise<{ engine: DockerRuntime; containerId: string; task: Task } | undefined> {
    const tasks = await this.tasks(id);
    for (const task of [this.current(tasks), ...tasks]) {
      const containerId = task?.Status?.ContainerStatus?.ContainerID;
      if (task?.NodeID && containerId) {
        return { engine: await this.#engineOf(task.NodeID), containerId, task };
      }
    }
    return undefined;
  }

  async taskContainer(id: string) {
    const found = await this.container(id);
    if (!found) throw new Error(`service ${id} has no container`);
    return found;
  }

  async inspect(id: string): Promise<ContainerInfo | undefined> {
    const service = await this.get(id);
    if (!service?.Spec) return undefined;
    const spec = service.Spec;
    const cs = spec.TaskTemplate?.ContainerSpec ?? {};
    const limits = spec.TaskTemplate?.Resources?.Limits ?? {};
    const tasks = await this.tasks(service.ID);
    const task = this.current(tasks);
    const replicas = spec.Mode?.Replicated?.Replicas ?? 0;
    let running = replicas > 0 && taskRuns(task);
    let state: ContainerState;
    if (running) state = "running";
    else if (replicas > 0) state = "restarting";
    // Scaled to 0 the swarm drops the tasks: a service that was ever updated has been started.
    else state = tasks.length === 0 && !service.PreviousSpec ? "created" : "exited";
    const targets = (spec.TaskTemplate?.Networks ?? []).map((n) => n.Target ?? "");
    const network = targets[0];
    const attachment = (task?.NetworksAttachments ?? []).find(
      (a) =>
        a.Network?.Spec?.Name === network ||
        (a as { Network?: { ID?: string } }).Network?.ID === network,
    );
    const networks = await this.#networkNamesOf(targets, task);
    const address = running ? attachment?.Addresses?.[0]?.split("/")[0] : undefined;
    const found = await this.container(service.ID).catch(() => undefined);
    const container = found ? await found.engine.inspect(found.containerId) : undefined;
    // The task runs but its container is paused (pauseForCopy): it cannot serve.
    if (running && container?.state === "paused") {
      running = false;
      state = "paused";
    }
    const image = (cs.Image ?? "").replace(/@sha256:[0-9a-f]+$/, "");
    const nodeId = pinnedNode(spec);
    return {
      id: service.ID,
      name: spec.Name ?? "",
      image,
      imageId:
        container?.imageId ??
        (nodeId ? await (await this.#engineOf(nodeId)).imageId(image) : undefined) ??
        "",
      state,
      running,
      health: running ? container?.health : undefined,
      oomKilled: container?.oomKilled ?? false,
      exitCode: task?.Status?.ContainerStatus?.ExitCode ?? container?.exitCode ?? 0,
      restartCount: Math.max(0, tasks.length - 1),
      startedAt: running ? container?.startedAt : undefined,
      finishedAt: container?.finishedAt,
      labels: spec.Labels ?? {},
      address,
      networks,
      node: nodeId,
      ports: {},
      hostname: cs.Hostname ?? "",
      limits: {
        memoryBytes: limits.MemoryBytes ?? 0,
        cpuShares: container?.limits.cpuShares ?? 0,
        nanoCpus: limits.NanoCPUs ?? 0,
        pidsLimit: limits.Pids ?? 0,
      },
      security: {
        init: cs.Init === true,
        capDrop: cs.CapabilityDrop ?? [],
        securityOpt: cs.Privileges?.NoNewPrivileges ? ["no-new-privileges"] : [],
        readOnly: cs.ReadOnly === true,
      },
      restartPolicy: spec.TaskTemplate?.RestartPolicy?.Condition ?? "",
      env: cs.Env ?? [],
      mounts: (cs.Mounts ?? []).map((m) => ({
        name: m.Source,
        destination: m.Target ?? "",
        type: m.Type ?? "volume",
      })),
    };
  }

  /** The names of a spec's networks (it holds ids): from the task's attachments, else looked up. */
  async #networkNamesOf(targets: string[], task: Task | undefined): Promise<string[]> {
    // A network's id names it for good: remembered (inspect runs every few seconds).
    const known = this.#networkNames;
    for (const a of task?.NetworksAttachments ?? []) {
      const { ID, Spec } = (a.Network ?? {}) as { ID?: string; Spec?: { Name?: string } };
      if (ID && Spec?.Name) known.set(ID, Spec.Name);
    }
    if (targets.some((t) => !known.has(t))) {
      for (const [id, name] of await networkNames(this.#docker, call)) known.set(id, name);
    }
    return targets.map((t) => known.get(t) ?? t);
  }

  async list(labels: Record<string, string>): Promise<ContainerSummary[]> {
    const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
    const services = (await call(() => this.#docker.listServices({ filters }))) as Service[];
    if (services.length === 0) return [];
    const running = new Set(
      (
        (await call(() =>
          this.#docker.listTasks({ filters: { "desired-state": ["running"] } }),
        )) as Task[]
      )
        .filter((t) => taskRuns(t))
        .map((t) => (t as { ServiceID?: string }).ServiceID),
    );
    return services.map((s) => ({
      id: s.ID,
      name: s.Spec?.Name ?? "",
      state: running.has(s.ID) ? "running" : "exited",
      labels: s.Spec?.Labels ?? {},
    }));
  }
}
