import { sleepIdleInstances } from "../instances/sleep.ts";

/** Periodic: puts every instance idle past its plan's period to sleep (decision 0164). */
export async function sleepIdleInstancesJob() {
  return { instances: await sleepIdleInstances() };
}
