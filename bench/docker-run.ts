import type { DockerRuntime } from "../worker/runtime/docker.ts";

/**
 * Removes every container and volume a Docker bench run created (`label`=`run`) and its network.
 * Type-only imports: the benches set their environment before loading the platform's modules.
 */
export async function removeRunObjects(
  rt: DockerRuntime,
  label: string,
  run: string,
  network: string,
): Promise<void> {
  for (const c of await rt.list({ [label]: run })) await rt.remove(c.id);
  const { Volumes } = await rt.docker.listVolumes({ filters: { label: [`${label}=${run}`] } });
  for (const v of Volumes ?? []) await rt.removeVolume(v.Name);
  await rt.docker
    .getNetwork(network)
    .remove()
    .catch(() => {});
}
