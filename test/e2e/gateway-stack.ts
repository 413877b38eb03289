import { randomBytes } from "node:crypto";
import path from "node:path";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { runTurn } from "../../app/server/agents/talk.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { freePort } from "../../app/server/platform/embedded-postgres.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { type Child, root, startNode } from "../../bench/servers.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { allowDockerNetworks, cleanupTestObjects, testRun } from "../runtime/docker-support.ts";
import { type RunningApp, startApp } from "./app.ts";

// The whole stack a browser test of a real gateway needs (talk, progress, control-ui): the built
// server on 0.0.0.0 (the browser uses 127.0.0.1, the container the bridge's gateway address), a
// local fake OpenAI-compatible provider behind the AI layer, this process as the worker's
// runtime, and one user with credits and an agent `Pal` whose instance record exists (not yet
// provisioned: each file provisions as its test needs).

/** bench/fake-openai.ts's answer. */
export const REPLY = "Hello! How can I help you today?";

export interface GatewayStack {
  app: RunningApp;
  fake: Child;
  rt: DockerRuntime;
  row: InstanceRow;
}

export async function startGatewayStack(options: {
  user: string;
  agent: string;
  /** Worker-side settings of this process (read by provision). */
  env?: Record<string, string>;
  /** Settings of the server under test. */
  appEnv?: Record<string, string>;
}): Promise<GatewayStack> {
  const rt = new DockerRuntime({ maxCpus: 1 });
  Object.assign(process.env, {
    SESSION_SECRET: randomBytes(32).toString("hex"),
    SEALING_KEY: randomBytes(32).toString("hex"),
    RUNTIME_DEPLOYMENT: testRun,
    RUNTIME_NETWORK: `agent-test-${testRun}`,
    ...options.env,
  });
  resetEnvCache();
  setRuntime(rt);
  allowDockerNetworks();
  const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK as string, {
    "agent-platform.deployment": testRun,
  });
  const fake = await startNode(
    path.join(root, "bench/fake-openai.ts"),
    await freePort(),
    "/v1/models",
  );
  const app = await startApp({
    HOST: "0.0.0.0",
    OPENAI_API_KEY: "fake-key",
    OPENAI_BASE_URL: `${fake.url}/v1`,
    ...options.appEnv,
  });
  process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${new URL(app.url).port}/api/ai/v1`;
  resetEnvCache();
  await sessionCookieFor(options.user);
  const grant = `led_${options.agent}`;
  await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
    values (${grant}, ${options.user}, 5000000, 'test grant', ${grant})`;
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${options.agent}, ${options.user}, 'Pal', 'main', 'openai/gpt-4o-mini', 'starter')`;
  const row = await ensureInstanceRecord(options.user, { plan: "solo" });
  return { app, fake, rt, row };
}

/** Stops what started; also after a start that failed part-way (by the run's labels). */
export async function stopGatewayStack(stack: GatewayStack | undefined): Promise<void> {
  await stack?.app.stop();
  await stack?.fake.stop();
  setRuntime(undefined);
  await cleanupTestObjects(stack?.rt ?? new DockerRuntime({ maxCpus: 1 }));
}

/**
 * One turn sent to a freshly booted gateway past the platform, up to three times: a gateway fresh
 * from boot sometimes ends its very first run in an error (seen in the e2e files and in
 * bench/talk.ts; noted on issue 9), so the pages are tested from the second run on.
 */
export async function warmUpTurn(instanceId: string): Promise<void> {
  const fresh = (await getInstance(instanceId)) as InstanceRow;
  const { client } = await connectPaired(fresh, fresh.gateway_address as string);
  try {
    const { key } = await client.request<{ key: string }>("sessions.create", { agentId: "main" });
    for (let attempt = 1; ; attempt++) {
      try {
        await runTurn(client, key, "warm up");
        return;
      } catch (error) {
        if (attempt >= 3) throw error;
      }
    }
  } finally {
    client.close();
  }
}
