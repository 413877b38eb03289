import { expect, it } from "vitest";
import { awaitJob } from "../../app/server/agents/instances.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { beginShutdown, shutdownSignal } from "../../app/server/platform/shutdown.server.ts";

// Issue 24, fault 4: a web that begins to stop answers the requests waiting on a job at once
// (with what is known) instead of holding them for their whole wait. Its own file: the stop of
// a process is for good.

it("a wait on a job that no worker takes ends as soon as the web begins to stop", async () => {
  const jobId = await sendJob("send-email", { to: "a@example.com", subject: "s", text: "t" });
  const t0 = Date.now();
  const waiting = awaitJob("send-email", jobId, 10_000);
  setTimeout(beginShutdown, 300);
  expect(await waiting).toBeUndefined();
  const waitedMs = Date.now() - t0;
  expect(shutdownSignal().aborted).toBe(true);
  expect(waitedMs).toBeGreaterThanOrEqual(250);
  expect(waitedMs).toBeLessThan(2_000);
});
