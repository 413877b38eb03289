import type Docker from "dockerode";
import { tmpVolumeOf } from "./docker-volumes.ts";
import type { Demand } from "./placement.ts";
import { type ContainerSpec, LABELS } from "./types.ts";

// The Swarm service a gateway runs as: hardening, resources, placement on its node, its network.

/**
 * The create request of an instance's service, made with no replica: pinned to `nodeId` (the
 * node that holds its state volume), `demand` as reservations and limits, `env` as given (the
 * caller adds what a limited volume needs), a read-only root with the volume's own /tmp when
 * `limited`, and `hosts` written into its hosts file. The image's health check gets
 * `bootBoundMs` as its start period: a swarm replaces an unhealthy task, and the image's 120 s
 * would have it kill a boot the platform still waits for (decision 0252).
 */
export function gatewayServiceSpec(
  spec: ContainerSpec,
  options: {
    nodeId: string;
    env: Record<string, string>;
    demand: Demand;
    limited: boolean;
    hosts: string[];
    bootBoundMs?: number;
  },
): Docker.CreateServiceOptions {
  const { nodeId, env, demand, limited, hosts, bootBoundMs } = options;
  const labels = {
    ...spec.labels,
    [LABELS.managed]: "1",
    [LABELS.instanceId]: spec.instanceId,
    [LABELS.userId]: spec.userId,
    [LABELS.role]: "gateway",
  };
  return {
    Name: spec.name,
    Labels: labels,
    Mode: { Replicated: { Replicas: 0 } },
    TaskTemplate: {
      ContainerSpec: {
        Image: spec.image,
        Hostname: spec.hostname,
        Args: spec.cmd,
        Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
        Labels: labels,
        Init: true,
        CapabilityDrop: ["ALL"],
        // Honoured from API 1.46; older engines need dockerd --no-new-privileges (decision).
        Privileges: { NoNewPrivileges: true },
        StopGracePeriod: 10e9,
        ReadOnly: limited,
        Mounts: [
          { Type: "volume", Source: spec.volume, Target: spec.volumeTarget },
          ...(limited
            ? [{ Type: "volume", Source: tmpVolumeOf(spec.volume), Target: "/tmp" }]
            : []),
        ],
        ...(hosts.length ? { Hosts: hosts } : {}),
        // The engine fills the other fields from the image's HEALTHCHECK.
        ...(bootBoundMs ? { Healthcheck: { StartPeriod: bootBoundMs * 1e6 } } : {}),
      },
      Resources: {
        Limits: {
          NanoCPUs: demand.nanoCpus,
          MemoryBytes: demand.memoryBytes,
          Pids: spec.limits.pidsLimit,
        },
        Reservations: { NanoCPUs: demand.nanoCpus, MemoryBytes: demand.memoryBytes },
      },
      RestartPolicy: {
        Condition: spec.restartPolicy === "no" ? "none" : "on-failure",
        Delay: 1e9,
      },
      Placement: { Constraints: [`node.id==${nodeId}`] },
      Networks: [{ Target: spec.network, Aliases: [spec.hostname] }],
      LogDriver: { Name: "json-file", Options: { "max-size": "10m", "max-file": "3" } },
    },
    // One replica, one address: the task's own (no virtual IP in front of it).
    EndpointSpec: { Mode: "dnsrr" },
  } as unknown as Docker.CreateServiceOptions;
}
