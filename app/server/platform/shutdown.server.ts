// The process is stopping (SIGTERM from `npm start`'s supervisor or the orchestrator): requests
// that wait on a background job stop waiting and answer with what is known now, so the web
// drains within its bound instead of holding a client until the job or the kill timer ends.

const controller = new AbortController();

/** Aborted once the process begins to stop. */
export const shutdownSignal = (): AbortSignal => controller.signal;

export function beginShutdown(): void {
  controller.abort(new Error("the process is stopping"));
}
