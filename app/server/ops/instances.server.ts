import {
  instancesOverview,
  repairInstance,
  startInstance,
  stopInstance,
  updateInstanceImage,
} from "../agents/instances.server.ts";

// The console's instance actions go through the lifecycle API's own services (jobs awaited
// by the web, the worker acting), so an operator's start is a user's start.

export const OPS_INSTANCE_ACTIONS = ["start", "stop", "repair", "update"] as const;
export type OpsInstanceAction = (typeof OPS_INSTANCE_ACTIONS)[number];

export { instancesOverview };

export function instanceActionFor(userId: string, action: OpsInstanceAction) {
  switch (action) {
    case "start":
      return startInstance(userId);
    case "stop":
      return stopInstance(userId);
    case "repair":
      return repairInstance(userId);
    case "update":
      return updateInstanceImage(userId);
  }
}
