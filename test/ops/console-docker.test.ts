import { afterAll, beforeAll, expect, it } from "vitest";
import * as opsInstances from "../../app/routes/ops.instances.tsx";
import * as opsUser from "../../app/routes/ops.users.$id.tsx";
import { ensureInstanceRecord, getInstance } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { ensureContainer } from "../../worker/instances/container.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { newUser } from "../accounts/helpers.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  ensureHealthzImage,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";
import { postPage } from "./support.ts";

// The console against a real engine (the /healthz stand-in, not the gateway): a suspension
// stops the user's running agent, and the console's instance actions go through the worker.

const rt = new DockerRuntime({ maxCpus: 1 });

describeDocker("operator console (Docker)", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.AGENT_GATEWAY_IMAGE = ensureHealthzImage();
    process.env.INSTANCE_ACTION_TIMEOUT_MS = "30000";
    process.env.RECONCILE_CRON = "0 0 1 1 *";
    resetEnvCache();
    resetRateLimiters();
    setRuntime(rt);
    allowDockerNetworks();
    await startWorker({ concurrency: 2 });
  }, 120_000);
  afterAll(async () => {
    await stopWorker(5_000);
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("suspending a user stops their running agent; the console starts it again through the worker", async () => {
    const operator = await newUser();
    await db()`update users set is_operator = true where id = ${operator.id}`;
    const user = await newUser();
    const row = await ensureInstanceRecord(user.id);
    expect((await ensureContainer(row)).running).toBe(true);
    const token = await db()`select 1 from ai_instance_tokens
      where instance_id = ${row.id} and revoked_at is null`;
    expect(token).toHaveLength(1);

    const suspended = await postPage(
      opsUser.action,
      `/ops/users/${user.id}`,
      { intent: "suspend", reason: "test" },
      operator.cookie,
      { id: user.id },
    );
    expect(suspended.status).toBe(303);
    await waitFor(async () => (await rt.inspect(row.container_name))?.running === false, {
      what: "the suspended user's gateway to stop",
    });
    expect((await getInstance(row.id))?.desired_state).toBe("stopped");

    await postPage(
      opsUser.action,
      `/ops/users/${user.id}`,
      { intent: "unsuspend" },
      operator.cookie,
      {
        id: user.id,
      },
    );
    const started = await postPage(
      opsInstances.action,
      "/ops/instances",
      { intent: "start", userId: user.id },
      operator.cookie,
    );
    expect(started.status).toBe(303);
    expect((await rt.inspect(row.container_name))?.running).toBe(true);
    const [entry] = await db()<{ actor_type: string; actor_id: string; details: unknown }[]>`
      select actor_type, actor_id, details from audit_log
      where user_id = ${user.id} and action = 'instance.action'`;
    expect(entry).toEqual({
      actor_type: "operator",
      actor_id: operator.id,
      details: { action: "start" },
    });
  }, 120_000);
});
