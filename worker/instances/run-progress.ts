import {
  beginRun,
  failRun,
  type ProgressStep,
  type RunAction,
  type RunPath,
  recordStep,
  setRunPath,
} from "../../app/server/agents/progress.server.ts";

// The one way worker code records a start-up's progress (decision 0158): begin a run of an
// action, record each step as it is reached (`ready` ends it), or say it failed. Recording never
// throws: progress is for people to watch, never a reason for a job to fail.

export interface RunProgress {
  step(step: ProgressStep): Promise<void>;
  path(path: RunPath): Promise<void>;
  fail(): Promise<void>;
}

/** A run of `action` on the instance, from now on. */
export async function startRun(instanceId: string, action: RunAction): Promise<RunProgress> {
  await beginRun(instanceId, action);
  return run(instanceId, action);
}

/** The instance's open run, continued (e.g. by a job that follows the one that began it). */
export function run(instanceId: string, action: RunAction): RunProgress {
  return {
    step: (step) => recordStep(instanceId, step, action),
    path: (path) => setRunPath(instanceId, path),
    fail: () => failRun(instanceId),
  };
}
