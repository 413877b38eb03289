/** What a job handler gets besides its payload (pg-boss's delivery of the job). */
export interface JobContext {
  jobId: string;
  retryCount: number;
  signal: AbortSignal;
}
