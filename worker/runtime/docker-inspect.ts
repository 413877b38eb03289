import type Docker from "dockerode";
import type { ContainerInfo, ContainerState, ContainerStats } from "./types.ts";

// The engine's container inspect and stats as the driver-neutral ContainerInfo and
// ContainerStats (pure mappings, no engine calls).

export function containerInfoOf(c: Docker.ContainerInspectInfo): ContainerInfo {
  const networks = c.NetworkSettings?.Networks ?? {};
  const address = Object.values(networks).find((n) => n?.IPAddress)?.IPAddress || undefined;
  const ports: ContainerInfo["ports"] = {};
  for (const [key, bindings] of Object.entries(c.NetworkSettings?.Ports ?? {})) {
    if (!bindings) continue;
    ports[key] = bindings.map((b) => ({ hostIp: b.HostIp, hostPort: b.HostPort }));
  }
  const health = (c.State as { Health?: { Status?: string } }).Health?.Status;
  const hc = c.HostConfig as Docker.HostConfig;
  return {
    id: c.Id,
    name: c.Name.replace(/^\//, ""),
    image: c.Config.Image,
    imageId: c.Image,
    state: c.State.Status as ContainerState,
    running: c.State.Running && !c.State.Paused,
    health:
      health === "starting" || health === "healthy" || health === "unhealthy" ? health : undefined,
    oomKilled: c.State.OOMKilled,
    exitCode: c.State.ExitCode,
    restartCount: c.RestartCount,
    startedAt: c.State.StartedAt?.startsWith("0001") ? undefined : c.State.StartedAt,
    finishedAt: c.State.FinishedAt?.startsWith("0001") ? undefined : c.State.FinishedAt,
    labels: c.Config.Labels ?? {},
    address,
    networks: Object.keys(networks),
    ports,
    hostname: c.Config.Hostname,
    limits: {
      memoryBytes: hc.Memory ?? 0,
      cpuShares: hc.CpuShares ?? 0,
      nanoCpus: hc.NanoCpus ?? 0,
      pidsLimit: hc.PidsLimit ?? 0,
    },
    security: {
      init: hc.Init === true,
      capDrop: hc.CapDrop ?? [],
      securityOpt: hc.SecurityOpt ?? [],
      readOnly: hc.ReadonlyRootfs === true,
    },
    restartPolicy: hc.RestartPolicy?.Name ?? "",
    env: c.Config.Env ?? [],
    mounts: (c.Mounts ?? []).map((m) => ({
      name: m.Name,
      destination: m.Destination,
      type: m.Type,
    })),
  };
}

export function containerStatsOf(s: Docker.ContainerStats): ContainerStats {
  const cpuDelta = s.cpu_stats.cpu_usage.total_usage - (s.precpu_stats.cpu_usage?.total_usage ?? 0);
  const systemDelta = (s.cpu_stats.system_cpu_usage ?? 0) - (s.precpu_stats.system_cpu_usage ?? 0);
  const online = s.cpu_stats.online_cpus || s.cpu_stats.cpu_usage.percpu_usage?.length || 1;
  const cpuPercent = systemDelta > 0 && cpuDelta > 0 ? (cpuDelta / systemDelta) * online * 100 : 0;
  // Like `docker stats`: usage minus the page cache that can be reclaimed.
  const mem = s.memory_stats;
  const inactive =
    (mem.stats as Record<string, number> | undefined)?.inactive_file ??
    (mem.stats as Record<string, number> | undefined)?.total_inactive_file ??
    0;
  let rx = 0;
  let tx = 0;
  for (const n of Object.values(s.networks ?? {})) {
    rx += n.rx_bytes;
    tx += n.tx_bytes;
  }
  return {
    cpuPercent: Math.round(cpuPercent * 100) / 100,
    memoryBytes: Math.max(0, (mem.usage ?? 0) - inactive),
    memoryLimitBytes: mem.limit ?? 0,
    pids: (s as { pids_stats?: { current?: number } }).pids_stats?.current ?? 0,
    rxBytes: rx,
    txBytes: tx,
  };
}
