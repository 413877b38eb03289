import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { ServerBuild } from "@remix-run/node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import * as chatRoute from "../../app/routes/api.ai.chat.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { registerDatabaseGauges } from "../../app/server/ops/prometheus.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { createWebServer } from "../../app/server/platform/web/web-server.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { startMetricsServer } from "../../worker/metrics-server.ts";
import { newUser } from "../accounts/helpers.ts";
import { configureAi } from "../ai/support.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";

// A real Prometheus (Debian's binary, on loopback, a temporary config) scrapes the web's and a
// worker's /metrics while a chat and a job run (issue 51); PromQL over what it stored shows the
// chat's tokens and the job's duration. Skipped without the binary locally, failing under CI.

const TOKEN = "metrics-token-0123456789";
const run = promisify(execFile);
const available = await run("prometheus", ["--version"]).then(
  () => true,
  () => false,
);
const tmp = mkdtempSync(path.join(tmpdir(), "prometheus-scrape-"));
const openai = createOpenAiFake();

let web: Server | undefined;
let workerMetrics: Server | undefined;
let prometheus: ChildProcess | undefined;
let promUrl = "";

async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address() as AddressInfo;
  await new Promise((r) => probe.close(r));
  return port;
}

const vector = z.object({
  status: z.literal("success"),
  data: z.object({
    result: z.array(
      z.object({
        metric: z.record(z.string(), z.string()),
        value: z.tuple([z.number(), z.string()]),
      }),
    ),
  }),
});

/** The first sample of an instant PromQL query, or undefined when it has none (yet). */
async function query(promql: string): Promise<number | undefined> {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = vector.parse(await res.json());
  const first = body.data.result[0];
  return first ? Number(first.value[1]) : undefined;
}

describe("without Prometheus", () => {
  it.runIf(!available && process.env.CI)("fails under CI", () => {
    throw new Error("prometheus is missing: apt-get install prometheus (.ci/run does)");
  });
});

describe.runIf(available)("a real Prometheus scraping the platform", () => {
  beforeAll(async () => {
    process.env.METRICS_TOKEN = TOKEN;
    process.env.WORKER_METRICS_PORT = "0";
    resetEnvCache();
    registerDatabaseGauges();
    mswServer.use(...openai.handlers);
    await configureAi({ OPENAI_API_KEY: "test-key" });

    const build = {
      routes: {
        root: { id: "root", path: "", module: {} },
        chat: { id: "chat", parentId: "root", path: "api/ai/chat", module: chatRoute },
      },
    } as unknown as ServerBuild;
    web = createWebServer({ build, publicDir: "/nonexistent" });
    web.listen(0, "127.0.0.1");
    await once(web, "listening");
    const webPort = (web.address() as AddressInfo).port;
    workerMetrics = await startMetricsServer();
    if (!workerMetrics) throw new Error("the worker's metrics listener did not start");
    const workerPort = (workerMetrics.address() as AddressInfo).port;
    await startWorker({ concurrency: 1 });

    const tokenFile = path.join(tmp, "token");
    writeFileSync(tokenFile, TOKEN);
    const scrape = (job: string, port: number) => `
  - job_name: ${job}
    scrape_interval: 1s
    authorization: { type: Bearer, credentials_file: ${tokenFile} }
    static_configs: [{ targets: ["127.0.0.1:${port}"] }]`;
    writeFileSync(
      path.join(tmp, "prometheus.yml"),
      `global: { scrape_interval: 1s }\nscrape_configs:${scrape("platform-web", webPort)}${scrape("platform-worker", workerPort)}\n`,
    );
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    prometheus = spawn(
      "prometheus",
      [
        `--config.file=${path.join(tmp, "prometheus.yml")}`,
        `--storage.tsdb.path=${path.join(tmp, "data")}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        "--log.level=warn",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let log = "";
    prometheus.stderr?.on("data", (chunk: Buffer) => {
      log += chunk.toString();
    });
    await waitFor(
      async () => {
        if (prometheus?.exitCode !== null) throw new Error(`prometheus exited: ${log}`);
        return (await fetch(`${promUrl}/-/ready`)).status === 200;
      },
      { timeoutMs: 30_000, what: `Prometheus ready (${log})` },
    );
  }, 60_000);

  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      prometheus.kill("SIGTERM");
      await once(prometheus, "exit");
    }
    await stopWorker(5_000);
    for (const server of [web, workerMetrics]) {
      server?.closeAllConnections();
      await new Promise((r) => server?.close(r));
    }
    delete process.env.METRICS_TOKEN;
    delete process.env.WORKER_METRICS_PORT;
    resetEnvCache();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("stores a chat's tokens and a job's duration, queried with PromQL", async () => {
    await expect
      .poll(() => query('sum(up{job=~"platform-web|platform-worker"})'), { timeout: 30_000 })
      .toBe(2);
    const user = await newUser();
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
      values ('led_scrape', ${user.id}, 10000000, 'purchase', 'scrape')`;
    const address = web?.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${address.port}/api/ai/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: user.cookie },
      body: JSON.stringify({
        model: "openai/gpt-4o",
        messages: [{ role: "user", content: "Say hello" }],
      }),
    });
    expect(res.status).toBe(200);
    await flushMetering();
    await sendJob("send-email", { to: "scrape@example.com", subject: "s", text: "t" });

    // The fake provider reports 12 prompt and 7 completion tokens.
    await expect
      .poll(
        () => query('sum(platform_ai_tokens_total{job="platform-web",model_family="gpt-4o"})'),
        {
          timeout: 30_000,
        },
      )
      .toBe(19);
    await expect
      .poll(
        () =>
          query(
            'sum(platform_http_requests_total{job="platform-web",route="/api/ai/chat",status_class="2xx"})',
          ),
        { timeout: 30_000 },
      )
      .toBe(1);
    await expect
      .poll(
        () =>
          query(
            'sum(platform_job_duration_seconds_count{job="platform-worker",queue="send-email",outcome="ok"})',
          ),
        { timeout: 30_000 },
      )
      .toBe(1);
    const seconds = await query(
      'sum(platform_job_duration_seconds_sum{job="platform-worker",queue="send-email"})',
    );
    expect(seconds).toBeGreaterThan(0);
    // A database fact, the same from both processes: the grant less the chat's charge.
    const [ledger] = await db()<{ sum: number }[]>`
      select sum(amount_micro_usd)::float8 as sum from credit_ledger`;
    expect(ledger?.sum).toBeLessThan(10_000_000);
    await expect
      .poll(() => query("max without (instance, job) (platform_credit_ledger_micro_usd)"), {
        timeout: 30_000,
      })
      .toBe(ledger?.sum);
  }, 120_000);
});
