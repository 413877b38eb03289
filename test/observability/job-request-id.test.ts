import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getBoss, sendJob } from "../../app/server/platform/jobs.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import {
  currentRequestId,
  runWithRequestId,
} from "../../app/server/platform/request-context.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { sample } from "./support.ts";

// One id finds a request, the jobs it enqueued and the worker's work on them (issue 51).

const ran: Array<{ to: string; requestId: string | undefined; logged: unknown }> = [];

vi.mock("../../app/server/platform/mail.server.ts", () => ({
  deliverMail: async (mail: { to: string }) => {
    ran.push({ to: mail.to, requestId: currentRequestId(), logged: logger().bindings().requestId });
    return { messageId: "m", via: "test" };
  },
}));

const mail = (to: string) => ({ to, subject: "s", text: "t" });

describe("a request's id in the jobs it enqueues", () => {
  beforeAll(() => startWorker({ concurrency: 1 }));
  afterAll(() => stopWorker(5_000));

  it("is stored beside the payload and the worker runs and logs the job under it", async () => {
    const id = await runWithRequestId("req-abc", () => sendJob("send-email", mail("a@x.test")));
    const job = await (await getBoss()).getJobById("send-email", id);
    expect(job?.data).toMatchObject({ to: "a@x.test", requestId: "req-abc" });
    await expect
      .poll(() => ran.find((r) => r.to === "a@x.test"), { timeout: 20_000 })
      .toEqual({
        to: "a@x.test",
        requestId: "req-abc",
        logged: "req-abc",
      });
  });

  it("times each job by queue and outcome", async () => {
    expect(
      await sample("platform_job_duration_seconds_count", { queue: "send-email", outcome: "ok" }),
    ).toBeGreaterThanOrEqual(1);
  });

  it("gives a job sent outside any request an id of its own", async () => {
    const id = await sendJob("send-email", mail("b@x.test"));
    const job = await (await getBoss()).getJobById("send-email", id);
    expect(job?.data).not.toHaveProperty("requestId");
    await expect
      .poll(() => ran.find((r) => r.to === "b@x.test")?.requestId, { timeout: 20_000 })
      .toBe(`job-${id}`);
  });
});
