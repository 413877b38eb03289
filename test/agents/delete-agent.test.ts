import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as agentPage from "../../app/routes/agents.$id._index.tsx";
import * as agentRoute from "../../app/routes/api.agents.$id.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { storeChannelCredential } from "../../app/server/agents/channels.server.ts";
import {
  ensureInstanceRecord,
  getInstanceByUser,
} from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { ensureContainer } from "../../worker/instances/container.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  ensureHealthzImage,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";
import { agentUser, apiKeyOf, asUser } from "./support.ts";

// DELETE /api/agents/:id and the agent page's confirmed delete: the slot is freed, another
// user's agent is 404, the last agent takes its gateway (container, volume, tokens, channel
// credentials) with it, and every deletion is audited.

const del = (who: { cookie?: string; key?: string }, id: string) =>
  asUser(who, agentRoute, `/api/agents/${id}`, { method: "DELETE", params: { id } });

const newAgent = (userId: string, name: string) =>
  createAgentRecord(userId, { name, model: "openai/gpt-4o-mini" });

describe("deleting an agent", () => {
  it("frees the tier slot, queues the gateway sync, 404 for another user's or a gone id, audited", async () => {
    const owner = await agentUser("solo");
    const stranger = await agentUser("solo");
    const first = await newAgent(owner.id, "one");
    await expect(newAgent(owner.id, "two")).rejects.toMatchObject({ status: 429 });

    const foreign = await del(stranger, first.id);
    expect(foreign.status).toBe(404);
    expect(foreign.json).toEqual({ error: "Agent not found" });
    expect(await db()`select 1 from agents where id = ${first.id}`).toHaveLength(1);
    expect((await del({}, first.id)).status).toBe(401);

    const key = await apiKeyOf(owner.id);
    const res = await del({ key }, first.id);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ success: true, id: first.id, instanceRemoved: false });
    expect((await del({ key }, first.id)).status).toBe(404);
    // The slot is free again.
    const second = await newAgent(owner.id, "two");
    const third = await newAgent(owner.id, "three").catch((e) => e);
    expect(third).toMatchObject({ status: 429 });

    // With another agent left, only the gateway's entry goes: a sync, no teardown.
    const pro = await agentUser("collective");
    const a = await newAgent(pro.id, "a");
    await newAgent(pro.id, "b");
    expect((await del(pro, a.id)).json.instanceRemoved).toBe(false);
    const boss = await getBoss();
    expect(await boss.findJobs("sync-agents", { data: { userId: pro.id } })).toHaveLength(1);
    expect(await boss.findJobs("teardown-instance", { data: { userId: pro.id } })).toHaveLength(0);

    const entries = await db()<
      { action: string; actor_type: string; actor_id: string; target: string }[]
    >`
      select action, actor_type, actor_id, target from audit_log
      where user_id = ${owner.id} and action = 'agent.deleted'`;
    expect(entries).toEqual([
      {
        action: "agent.deleted",
        actor_type: "api_key",
        actor_id: expect.any(String),
        target: first.id,
      },
    ]);
    expect(JSON.stringify(await db()`select * from audit_log`)).not.toContain(key);
    expect(second.id).not.toBe(first.id);
  });

  it("the agent page deletes only after its confirm step", async () => {
    const owner = await agentUser("solo");
    const agent = await newAgent(owner.id, "paged");
    const post = (fields: Record<string, string>) =>
      call(agentPage as unknown as RouteModule, `/agents/${agent.id}`, {
        method: "POST",
        params: { id: agent.id },
        headers: {
          cookie: owner.cookie,
          "content-type": "application/x-www-form-urlencoded",
        },
        rawBody: new URLSearchParams(fields).toString(),
      }).catch((thrown: Response) => ({ status: thrown.status, headers: thrown.headers }));
    const unconfirmed = await post({ intent: "delete" });
    expect(unconfirmed.status).toBe(303);
    expect(unconfirmed.headers.get("location")).toBe("?confirm=delete");
    expect(await db()`select 1 from agents where id = ${agent.id}`).toHaveLength(1);
    const confirmed = await post({ intent: "delete", confirm: "yes" });
    expect(confirmed.status).toBe(303);
    expect(confirmed.headers.get("location")).toBe("/agents?notice=deleted");
    expect(await db()`select 1 from agents where id = ${agent.id}`).toHaveLength(0);
  });
});

const rt = new DockerRuntime({ maxCpus: 1 });

describeDocker("deleting the last agent removes its gateway (Docker)", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.AGENT_GATEWAY_IMAGE = ensureHealthzImage();
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

  it("stops and removes container and state volume, revokes tokens and channel credentials, frees the slot", async () => {
    const owner = await agentUser("solo");
    const agent = await newAgent(owner.id, "last");
    const row = await ensureInstanceRecord(owner.id);
    const info = await ensureContainer(row);
    expect(info.running).toBe(true);
    expect(await rt.volumeExists(row.volume_name)).toBe(true);
    await storeChannelCredential(owner.id, "chatapp1", { token: "123456:telegram-secret" });
    expect(
      await db()`select 1 from ai_instance_tokens where instance_id = ${row.id} and revoked_at is null`,
    ).toHaveLength(1);

    const res = await del(owner, agent.id);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ success: true, id: agent.id, instanceRemoved: true });
    // At once: tokens, channel credentials, the instance record.
    expect(
      await db()`select 1 from ai_instance_tokens where instance_id = ${row.id} and revoked_at is null`,
    ).toHaveLength(0);
    expect(await db()`select 1 from channel_credentials where user_id = ${owner.id}`).toHaveLength(
      0,
    );
    expect(await getInstanceByUser(owner.id)).toBeUndefined();
    // The worker removes container and volume.
    await waitFor(async () => (await rt.inspect(row.container_name)) === undefined, {
      what: "the container to be removed",
    });
    await waitFor(async () => !(await rt.volumeExists(row.volume_name)), {
      what: "the state volume to be removed",
    });
    await waitFor(
      async () =>
        (await db()`select 1 from instance_teardowns where instance_id = ${row.id}`).length === 0,
      { what: "the teardown record to be cleared" },
    );
    // The slot is free: a new agent gets a new instance, untouched by the finished teardown.
    const next = await newAgent(owner.id, "again");
    expect(next.gateway_agent_id).toBe("main");
    const fresh = await ensureInstanceRecord(owner.id);
    expect(fresh.id).not.toBe(row.id);

    const [entry] = await db()<{ details: Record<string, unknown> }[]>`
      select details from audit_log where user_id = ${owner.id} and action = 'agent.deleted'`;
    expect(entry!.details).toMatchObject({ instance: row.id, channelsRemoved: "chatapp1" });
    expect(JSON.stringify(await db()`select * from audit_log`)).not.toContain("telegram-secret");
  }, 120_000);
});
