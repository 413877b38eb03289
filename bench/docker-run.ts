import { randomBytes } from "node:crypto";
import type { DockerRuntime } from "../worker/runtime/docker.ts";

/**
 * Removes every container and volume a Docker bench run created (`label`=`run`) and its network,
 * and the named volumes (a provisioned instance's volume is created by its container's mount,
 * without the run's label).
 * Type-only imports: the benches set their environment before loading the platform's modules.
 */
export async function removeRunObjects(
  rt: DockerRuntime,
  label: string,
  run: string,
  network: string,
  volumes: string[] = [],
): Promise<void> {
  for (const c of await rt.list({ [label]: run })) await rt.remove(c.id);
  const { Volumes } = await rt.docker.listVolumes({ filters: { label: [`${label}=${run}`] } });
  for (const v of Volumes ?? []) await rt.removeVolume(v.Name);
  for (const name of volumes) await rt.removeVolume(name).catch(() => {});
  await rt.docker
    .getNetwork(network)
    .remove()
    .catch(() => {});
}

export interface BenchGateway {
  run: string;
  /** The container's name (and hostname); its volume is `<name>-state`. */
  name: string;
  image: string;
  labels: Record<string, string>;
  /** Instead of the image's command; no config is written then (not a gateway). */
  cmd?: string[];
  env?: Record<string, string>;
  /** Changes the platform's initial config before it is written (a variant's). */
  configure?: (config: Record<string, unknown>) => Record<string, unknown>;
}

/**
 * Creates (does not start) a gateway container as the worker creates one: the driver's create
 * with the solo plan's limits, the platform's initial config written into its empty volume (the
 * AI endpoint is not reached while idle or booting). Returns its id.
 */
export async function createBenchGateway(rt: DockerRuntime, g: BenchGateway): Promise<string> {
  const { gatewayConfig, writeConfigIfAbsent } = await import(
    "../worker/instances/gateway-config.ts"
  );
  const { STATE_DIR } = await import("../worker/instances/engine.ts");
  const { limitsForPlan } = await import("../worker/runtime/index.ts");
  const { env } = await import("../app/server/platform/env.server.ts");
  const volume = `${g.name}-state`;
  await rt.ensureVolume(volume, g.labels);
  if (!g.cmd || g.configure) {
    const { gatewayIp } = await rt.ensureNetwork(env().RUNTIME_NETWORK, g.labels);
    const base = gatewayConfig({
      aiBaseUrl: `http://${gatewayIp ?? "127.0.0.1"}:1/api/ai/v1`,
      aiToken: `ait_${randomBytes(24).toString("base64url")}`,
      model: env().RUNTIME_DEFAULT_MODEL,
      initial: true,
      controlUiRoot: await rt.controlUiRoot(g.image),
    });
    const config = g.configure ? g.configure(base) : base;
    await writeConfigIfAbsent(volume, g.image, async () => config);
  }
  return rt.create({
    instanceId: `ins_${g.name}`,
    userId: `usr_${g.run}`,
    image: g.image,
    cmd: g.cmd,
    name: g.name,
    hostname: g.name,
    volume,
    volumeTarget: STATE_DIR,
    network: env().RUNTIME_NETWORK,
    limits: limitsForPlan("solo"),
    env: { OPENCLAW_GATEWAY_TOKEN: randomBytes(32).toString("hex"), ...g.env },
    labels: g.labels,
    restartPolicy: "no",
  });
}
