import { sweepAllControlUiDevices } from "../instances/control-ui-sweep.ts";

/** Periodic: removes Control UI devices left paired by a web process that died (decision 0170). */
export async function sweepControlUiDevicesJob() {
  return { instances: await sweepAllControlUiDevices() };
}
