import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { type ParsedMail, simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss, sendJob } from "../../app/server/platform/jobs.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";

// A real SMTP server in the test; the job travels through pg-boss to an in-process worker.
describe("the send-email job", () => {
  const received: ParsedMail[] = [];
  const waiters: Array<() => void> = [];
  let smtp: SMTPServer;

  beforeAll(async () => {
    smtp = new SMTPServer({
      disabledCommands: ["STARTTLS"],
      authOptional: true,
      onData(stream, _session, callback) {
        simpleParser(stream)
          .then((mail) => {
            received.push(mail);
            for (const w of waiters.splice(0)) w();
            callback();
          })
          .catch(callback);
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
    await startWorker();
  });

  afterAll(async () => {
    await stopWorker(5_000);
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
    delete process.env.SMTP_URL;
    resetEnvCache();
  });

  const nextMail = () => new Promise<void>((resolve) => waiters.push(resolve));

  it("delivers through SMTP_URL", async () => {
    const address = smtp.server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    process.env.SMTP_URL = `smtp://127.0.0.1:${port}`;
    resetEnvCache();
    const arrived = nextMail();
    const id = await sendJob("send-email", {
      to: "ada@example.com",
      subject: "Reset your password",
      text: "Open http://localhost:3000/reset?token=abc to continue.",
    });
    await arrived;
    expect(received[0]?.subject).toBe("Reset your password");
    expect(received[0]?.text).toContain("http://localhost:3000/reset?token=abc");
    expect(received[0]?.to && "text" in received[0].to ? received[0].to.text : "").toBe(
      "ada@example.com",
    );
    const boss = await getBoss();
    await expect
      .poll(async () => (await boss.findJobs("send-email", { id }))[0]?.state)
      .toBe("completed");
  });

  it("writes an .eml file when SMTP is not configured", async () => {
    delete process.env.SMTP_URL;
    resetEnvCache();
    const id = await sendJob("send-email", { to: "bob@example.com", subject: "Local", text: "hi" });
    const boss = await getBoss();
    await expect
      .poll(async () => (await boss.findJobs("send-email", { id }))[0]?.state)
      .toBe("completed");
    const dir = path.join(process.env.DATA_DIR!, "mail");
    const files = await readdir(dir);
    expect(files).toHaveLength(1);
    const mail = await simpleParser(await readFile(path.join(dir, files[0]!)));
    expect(mail.subject).toBe("Local");
  });

  it("rejects an invalid payload before it is queued", async () => {
    await expect(
      sendJob("send-email", { to: "not-an-email", subject: "x", text: "y" }),
    ).rejects.toThrow();
  });
});
