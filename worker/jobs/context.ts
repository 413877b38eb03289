import { AsyncLocalStorage } from "node:async_hooks";

/** What a job handler gets besides its payload (pg-boss's delivery of the job). */
export interface JobContext {
  jobId: string;
  retryCount: number;
  signal: AbortSignal;
}

/** The job a piece of work runs for: Docker objects it creates are labelled with it. */
export interface CurrentJob {
  name: string;
  id: string;
  /** The attempt (pg-boss retryCount): a retry of the same job is a new owner. */
  retryCount: number;
}

const current = new AsyncLocalStorage<CurrentJob>();

/** Runs `fn` as the given job (worker.ts wraps every handler in it). */
export function runAsJob<T>(job: CurrentJob, fn: () => Promise<T>): Promise<T> {
  return current.run(job, fn);
}

/** The job the caller runs for, if any. */
export function currentJob(): CurrentJob | undefined {
  return current.getStore();
}
