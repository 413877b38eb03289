import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import * as agentPage from "../../app/routes/agents.$id._index.tsx";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as agentDetailRoute from "../../app/routes/api.agents.$id.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { STATE_DIR } from "../../worker/instances/engine.ts";
import { sampleStorage } from "../../worker/instances/storage-limits.ts";
import { prepareStorage } from "../../worker/instances/storage-setup.ts";
import { sweepGatewayTmp } from "../../worker/instances/tmp-sweep.ts";
import type { StorageQuota } from "../../worker/runtime/storage-quota.ts";
import { giveCredits } from "../ai/support.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import {
  type GatewayBench,
  provisionRealGateway,
  startGatewayBench,
  stopGatewayBench,
} from "../helpers/real-gateway.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import {
  describeDocker,
  ensureSleeperImage,
  testLabels,
  testRun,
} from "../runtime/docker-support.ts";
import { testStorageRoot } from "../runtime/storage-support.ts";

// A real gateway held to a hard storage limit (issue 50, decision 0216): its agent writes past
// the limit through a shell in the container, as the gateway's user; the write fails, the
// gateway still answers /healthz and a chat (its own state has a reserve, decision 0224); the
// API and the page say "storage full"; a second
// tenant's volume on the same engine takes writes; the limit is raised live (a storage upgrade)
// and lowered after its grace with the data kept (decision 0217). One gateway for the file.

const MiB = 1024 ** 2;
const LIMIT = 256 * MiB; // STORAGE_BASE_GB=0.25
const openai = createOpenAiFake();
const REPLY = "Still here, even with a full disk.";
const USER = "usr_storage_wall";
const AGENT = "agt_storagewall0000000";
const storage = await testStorageRoot();
let bench: GatewayBench | undefined;
let instance: InstanceRow;
let quota: StorageQuota | undefined;
let volume: string | undefined;
const otherVolume = `agent-test-${testRun}-tenant2`;

const headers = async () => ({ cookie: await sessionCookieFor(USER) });
const inGateway = (script: string) =>
  bench!.rt.exec(instance.container_name, ["sh", "-c", script], { timeoutMs: 120_000 });

describeDocker("storage limits (real gateway)", () => {
  beforeAll(async () => {
    if ("reason" in storage) throw new Error(storage.reason);
    quota = storage.quota;
    process.env.STORAGE_ROOT = quota.root;
    process.env.STORAGE_BASE_GB = "0.25";
    // A boot on a shared, loaded 2-core machine can take minutes (docs/development.md).
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "480000";
    resetEnvCache();
    openai.state.reply = REPLY;
    bench = await startGatewayBench({
      openai,
      routes: { "/api/agent": agentRoute as unknown as RouteModule },
    });
    expect(await prepareStorage(bench.rt)).toMatchObject({ enforced: true });
    await sessionCookieFor(USER);
    await giveCredits(USER, 5_000_000);
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${AGENT}, ${USER}, 'Filler', 'main', 'openai/gpt-4o-mini', 'starter')`;
    volume = (await ensureInstanceRecord(USER, { plan: "solo" })).volume_name;
    ({ instance } = await provisionRealGateway(USER));
  }, 600_000);

  afterAll(async () => {
    await stopGatewayBench(bench);
    // The Docker volumes are gone with the bench; their subvolumes go here.
    for (const name of [volume, otherVolume]) {
      if (name) await quota?.remove(name).catch(() => {});
    }
    delete process.env.STORAGE_ROOT;
    delete process.env.STORAGE_BASE_GB;
    delete process.env.GATEWAY_HEALTH_TIMEOUT_MS;
    resetEnvCache();
  });

  it("runs the gateway on its limited volume, root read-only, /tmp under the same limit", async () => {
    const usage = await bench!.rt.storageUsage();
    expect(usage.get(instance.volume_name)?.limitBytes).toBe(LIMIT);
    const readOnly = await inGateway("touch /home/node/x 2>&1; echo rc=$?");
    expect(readOnly.stdout).toMatch(/Read-only file system[\s\S]*rc=1/);
    // OpenClaw's own temporary files are on the volume's tmp (counted against the limit).
    expect((await inGateway("ls -d /tmp/openclaw && touch /tmp/probe")).exitCode).toBe(0);
    // The sweeper runs in the container (busybox) and leaves a live gateway's folders alone.
    expect(await sweepGatewayTmp(instance)).toEqual([]);
    expect((await inGateway("ls -d /tmp/openclaw /tmp/openclaw-state-locks-*")).exitCode).toBe(0);
  });

  it("runs the gateway's processes under the subvolume guard's filter (decision 0244)", async () => {
    // On top of Docker's own filter, which the container's init has: one more for each process
    // the entrypoint started (the gateway and its children; not a `docker exec`'s, such as the
    // health check's, whose parent is outside the container).
    const container = bench!.rt.docker.getContainer(instance.container_name);
    const init = (await container.inspect()).State.Pid;
    const { Titles, Processes } = (await container.top()) as {
      Titles: string[];
      Processes: string[][];
    };
    const status = async (pid: number) => {
      const text = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
      const field = (name: string) =>
        Number(new RegExp(`^${name}:\\s+(\\d+)$`, "m").exec(text)?.[1]);
      return { parent: field("PPid"), filters: field("Seccomp_filters") };
    };
    const underInit = async (pid: number): Promise<boolean> => {
      const { parent } = await status(pid);
      return parent === init || (parent > 1 && (await underInit(parent)));
    };
    const base = (await status(init)).filters;
    let checked = 0;
    for (const row of Processes) {
      const pid = Number(row[Titles.indexOf("PID")]);
      if (pid === init || !(await underInit(pid))) continue;
      expect((await status(pid)).filters, `pid ${pid}: ${row.at(-1)}`).toBe(base + 1);
      checked++;
    }
    expect(checked).toBeGreaterThan(0);
    // A command the platform execs into the gateway runs under the guard too (its OpenClaw CLI
    // calls read the agent's plugins and config).
    const exec = await inGateway("grep Seccomp_filters /proc/self/status");
    expect(exec.stdout.trim()).toBe(`Seccomp_filters:\t${base + 1}`);
  });

  it("refuses a write past the limit, keeps answering, and says full", async () => {
    const fill = await inGateway(
      `dd if=/dev/zero of=${STATE_DIR}/workspace/fill bs=1M count=400 2>&1; echo rc=$?`,
    );
    expect(fill.stdout).toMatch(/Disk quota exceeded/);
    expect(fill.stdout).toMatch(/rc=1/);
    // /tmp is the same limit: nothing more fits there either.
    expect((await inGateway("dd if=/dev/zero of=/tmp/more bs=1M count=8 2>&1")).exitCode).not.toBe(
      0,
    );
    // The gateway's own state still takes a write: its reserve (decision 0224).
    expect(
      (await inGateway(`dd if=/dev/zero of=${STATE_DIR}/state/probe bs=1M count=4 2>&1`)).exitCode,
    ).toBe(0);
    await inGateway(`rm -f ${STATE_DIR}/state/probe`);
    const used = (await bench!.rt.storageUsage()).get(instance.volume_name);
    expect(used?.usedBytes).toBeLessThanOrEqual(LIMIT);

    // The gateway still answers its health (a chat at the wall: the next test).
    const health = await inGateway("/bin/busybox wget -q -O - http://127.0.0.1:18789/healthz");
    expect(health.exitCode).toBe(0);
    // The worker's pass records it; the API and the page say full; one email at the crossing.
    await sampleStorage();
    const detail = await call(agentDetailRoute as unknown as RouteModule, `/api/agents/${AGENT}`, {
      headers: await headers(),
      params: { id: AGENT },
    });
    expect(detail.status).toBe(200);
    expect(detail.json.agent.storage).toMatchObject({
      limitBytes: LIMIT,
      full: true,
      warning: 95,
      enforced: true,
    });
    const page = (await agentPage.loader({
      request: new Request(`http://localhost/agents/${AGENT}`, { headers: await headers() }),
      params: { id: AGENT },
      context: {},
    })) as { agent: { storage: { full: boolean } } };
    expect(page.agent.storage).toMatchObject({ full: true });
    await sampleStorage(); // a second pass sends nothing more
    const mails = await db()<{ subject: string }[]>`
      select data->>'subject' as subject from pgboss.job where name = 'send-email'`;
    expect(mails.filter((m) => /storage is 95 % full/.test(m.subject))).toHaveLength(1);
  }, 240_000);

  // At the wall the agent's files are full, not the gateway's state (decision 0224): its reserve
  // records the turn and the chat is answered.
  it("answers a chat at the wall", async () => {
    const chat = await call(agentRoute, "/api/agent", {
      method: "POST",
      body: { action: "chat", message: "Are you there?" },
      headers: await headers(),
    });
    process.stdout.write(`chat at the wall: ${chat.status} ${chat.text.slice(0, 300)}\n`);
    expect(chat.status).toBe(200);
    expect(chat.json).toMatchObject({ reply: REPLY });
  }, 120_000);

  it("leaves a second tenant's volume on the same engine writable", async () => {
    await bench!.rt.ensureVolume(otherVolume, testLabels(), {
      limits: { memoryBytes: 0, cpuShares: 0, cpus: 1, pidsLimit: 0 },
      storageLimitBytes: LIMIT,
    });
    const wrote = await bench!.rt.runOnce({
      image: ensureSleeperImage(),
      volume: otherVolume,
      volumeTarget: "/data",
      entrypoint: ["sh", "-c"],
      cmd: ["dd if=/dev/zero of=/data/f bs=1M count=100 && sync && ls -l /data/f"],
      user: "1000", // a limited volume's state folder is the gateway user's (decision 0224)
      labels: testLabels(),
    });
    expect(wrote.exitCode).toBe(0);
    expect((await bench!.rt.storageUsage()).get(otherVolume)?.usedBytes).toBeGreaterThan(100 * MiB);
  }, 120_000);

  it("raises the limit live for an upgrade and lowers it after its grace, data kept", async () => {
    // A completed storage-upgrade checkout (the webhook's grant), then the pass it enqueues.
    await db()`insert into storage_grants (checkout_session_id, user_id, gigabytes)
      values ('cs_storage_wall', ${USER}, 50)`;
    await sampleStorage(USER);
    const raised = (await getInstance(instance.id))!;
    expect(Number(raised.storage_limit_bytes)).toBe(LIMIT + 50 * 1024 ** 3);
    // Same container, no re-provision: the write that failed goes through now.
    expect(raised.container_id).toBe(instance.container_id);
    expect(
      (await inGateway(`dd if=/dev/zero of=${STATE_DIR}/workspace/more bs=1M count=64 2>&1`))
        .exitCode,
    ).toBe(0);

    // The plan subscription ends: the upgrade stops counting; the data is above the base, so
    // the limit stays until the grace ends.
    await db()`insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id,
      status) values ('sub_storage_wall', ${USER}, 'cus_storage_wall', 'plan', 'solo', 'price_x',
      'canceled')`;
    await sampleStorage(USER);
    const waiting = (await getInstance(instance.id))!;
    expect(Number(waiting.storage_limit_bytes)).toBe(LIMIT + 50 * 1024 ** 3);
    expect(waiting.storage_grace_until).toBeInstanceOf(Date);

    await db()`update instances set storage_grace_until = now() - interval '1 second'
      where id = ${instance.id}`;
    await sampleStorage(USER);
    expect(Number((await getInstance(instance.id))!.storage_limit_bytes)).toBe(LIMIT);
    // Nothing deleted; nothing more fits; the gateway still answers.
    const kept = await inGateway(`ls -l ${STATE_DIR}/workspace/more | awk '{print $5}'`);
    expect(kept.stdout.trim()).toBe(String(64 * MiB));
    expect(
      (await inGateway(`dd if=/dev/zero of=${STATE_DIR}/workspace/again bs=1M count=8 2>&1`))
        .exitCode,
    ).not.toBe(0);
    expect(
      (await inGateway("/bin/busybox wget -q -O - http://127.0.0.1:18789/healthz")).exitCode,
    ).toBe(0);
  }, 120_000);
});
