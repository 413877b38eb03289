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
