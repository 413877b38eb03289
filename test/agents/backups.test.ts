import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
} from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { extract, pack } from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as downloadRoute from "../../app/routes/api.agents.$id.backups.$backupId.download.ts";
import * as exportRoute from "../../app/routes/api.agents.$id.backups.$backupId.export.ts";
import * as restoreRoute from "../../app/routes/api.agents.$id.backups.$backupId.restore.ts";
import * as backupRoute from "../../app/routes/api.agents.$id.backups.$backupId.ts";
import * as backupsRoute from "../../app/routes/api.agents.$id.backups.ts";
import * as cloneRoute from "../../app/routes/api.agents.$id.clone.ts";
import * as importRoute from "../../app/routes/api.agents.$id.import.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { RECORDS_VERSION } from "../../app/server/agents/backup-records.server.ts";
import { insertPendingBackup } from "../../app/server/agents/backups.server.ts";
import { channelCredentialFlags } from "../../app/server/agents/channels.server.ts";
import { deleteAgent } from "../../app/server/agents/delete-agent.server.ts";
import { setGatewayVersionPolicy } from "../../app/server/agents/gateway-versions.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { setStorageOverride } from "../../app/server/billing/storage-limit.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { platformPublicKey } from "../../app/server/platform/signing.server.ts";
import { runBackupJob } from "../../worker/instances/backup.ts";
import { pruneBackups, queueDueBackups } from "../../worker/instances/backup-schedule.ts";
import { ensureContainer } from "../../worker/instances/container.ts";
import { observe } from "../../worker/instances/observe.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { INTERRUPTED } from "../../worker/instances/restore-recovery.ts";
import { updateImage } from "../../worker/instances/update-image.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import {
  allowDockerNetworks,
  buildImage,
  cleanupTestObjects,
  describeDocker,
  ensureHealthzImage,
  HEALTHZ_IMAGE,
  removeImages,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";
import { agentUser, asUser } from "./support.ts";

// Backups end to end: routes → pg-boss job → in-process worker → Docker volume → encrypted
// object in the local store, and back through a restore. The gateway is the /healthz stand-in.

const base = (agentId: string) => `/api/agents/${agentId}/backups`;

async function untar(bytes: Buffer): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const reader = extract();
  Readable.from([bytes]).pipe(reader);
  for await (const entry of reader) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    files.set(entry.header.name, Buffer.concat(chunks));
  }
  return files;
}

/** A GET route's body as bytes (the call helper reads text). */
async function bytesOf(
  module: { loader: unknown },
  path: string,
  params: Record<string, string>,
  who: { cookie: string },
): Promise<{ status: number; bytes: Buffer }> {
  const res = await (module.loader as (args: unknown) => Promise<Response>)({
    request: new Request(`http://localhost${path}`, { headers: { cookie: who.cookie } }),
    params,
    context: { remoteAddress: "127.0.0.1" },
  });
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** An archive of the export layout with this manifest, signed by `privateKey`. */
async function forgedArchive(manifest: object, privateKey: KeyObject): Promise<Buffer> {
  const manifestBytes = Buffer.from(JSON.stringify(manifest));
  const signature = Buffer.from(sign(null, manifestBytes, privateKey).toString("base64url"));
  const archive = pack();
  archive.entry({ name: "manifest.json", size: manifestBytes.length }, manifestBytes);
  archive.entry({ name: "manifest.sig", size: signature.length }, signature);
  archive.entry({ name: "payload.tar", size: 3 }, Buffer.from("abc"));
  archive.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of archive) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe("backup routes without Docker work", () => {
  it("404 for another user's agent on every route, 400 for a bad id, 409 without an instance", async () => {
    const owner = await agentUser("solo");
    const intruder = await agentUser("solo");
    const agent = await createAgentRecord(owner.id, { name: "Ada", model: "m" });
    const backup = await insertPendingBackup(agent, "manual");
    const params = { id: agent.id, backupId: backup.id };
    const calls: Array<[unknown, string, string]> = [
      [backupsRoute, "GET", base(agent.id)],
      [backupsRoute, "POST", base(agent.id)],
      [backupRoute, "DELETE", `${base(agent.id)}/${backup.id}`],
      [downloadRoute, "GET", `${base(agent.id)}/${backup.id}/download`],
      [restoreRoute, "POST", `${base(agent.id)}/${backup.id}/restore`],
    ];
    for (const [m, method, path] of calls) {
      const res = await asUser(intruder, m, path, { method, params });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.json).toEqual({ error: "Agent not found" });
    }
    const bad = await asUser(owner, downloadRoute, "/x", {
      params: { id: agent.id, backupId: "nope" },
    });
    expect(bad.status).toBe(400);
    const noInstance = await asUser(owner, backupsRoute, base(agent.id), {
      method: "POST",
      params: { id: agent.id },
    });
    expect(noInstance.status).toBe(409);
    expect(noInstance.json.error).toMatch(/no instance/);
    const notReady = await asUser(owner, downloadRoute, "/x", { params });
    expect(notReady.status).toBe(409);
    const list = await asUser(owner, backupsRoute, base(agent.id), { params: { id: agent.id } });
    expect(list.json.backups).toEqual([
      expect.objectContaining({ id: backup.id, reason: "manual", status: "pending" }),
    ]);
  });

  it("clone: 404 for another user's agent, 400 for a bad body, 409 without an instance", async () => {
    const owner = await agentUser("solo");
    const intruder = await agentUser("solo");
    const agent = await createAgentRecord(owner.id, { name: "Ada", model: "m" });
    const path = `/api/agents/${agent.id}/clone`;
    const foreign = await asUser(intruder, cloneRoute, path, {
      method: "POST",
      params: { id: agent.id },
    });
    expect(foreign.status).toBe(404);
    expect(foreign.json).toEqual({ error: "Agent not found" });
    const bad = await asUser(owner, cloneRoute, path, {
      method: "POST",
      params: { id: agent.id },
      body: { name: "   " },
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/name/);
    const noInstance = await asUser(owner, cloneRoute, path, {
      method: "POST",
      params: { id: agent.id },
    });
    expect(noInstance.status).toBe(409);
    expect(noInstance.json.error).toMatch(/no instance/);
    const [count] = await db()<{ n: number }[]>`
      select count(*)::int as n from agents where user_id = ${owner.id}`;
    expect(count?.n).toBe(1);
  });

  it("keeps each reason's number of backups and queues those due by plan", async () => {
    const owner = await agentUser("solo");
    const agent = await createAgentRecord(owner.id, { name: "Kept", model: "m" });
    for (let i = 0; i < 9; i++) {
      const row = await insertPendingBackup(agent, "scheduled");
      await db()`update agent_backups set status = 'ready',
        created_at = now() - ${`${i} hours`}::interval where id = ${row.id}`;
    }
    for (let i = 0; i < 4; i++) {
      const row = await insertPendingBackup(agent, "pre-update");
      await db()`update agent_backups set status = 'ready' where id = ${row.id}`;
    }
    const stale = await insertPendingBackup(agent, "manual");
    await db()`update agent_backups set created_at = now() - interval '2 days' where id = ${stale.id}`;
    await pruneBackups();
    const [dead] = await db()`select status, error from agent_backups where id = ${stale.id}`;
    expect(dead).toEqual({ status: "failed", error: "the backup job never finished" });
    await db()`delete from agent_backups where id = ${stale.id}`;
    const left = await db()<{ reason: string; n: number }[]>`
      select reason, count(*)::int as n from agent_backups where agent_id = ${agent.id}
      group by reason order by reason`;
    expect(left).toEqual([
      { reason: "pre-update", n: 3 },
      { reason: "scheduled", n: 7 }, // solo: daily, seven kept
    ]);
    // The newest scheduled one is new: a daily plan is not due; a day later it is.
    await ensureInstanceRecord(owner.id, { plan: "solo" });
    const pending = async () =>
      (
        await db()`select 1 from agent_backups
          where agent_id = ${agent.id} and reason = 'scheduled' and status = 'pending'`
      ).length;
    await queueDueBackups();
    expect(await pending()).toBe(0);
    await queueDueBackups(new Date(Date.now() + 24 * 3_600_000));
    expect(await pending()).toBe(1);
  });
});

describeDocker("backup and restore (Docker, /healthz stand-in)", () => {
  const rt = new DockerRuntime({ maxCpus: 1 });
  const marker = "/home/node/.openclaw/workspace/MEMORY.md";
  let owner: { id: string; cookie: string };
  let agentId: string;
  let row: InstanceRow;

  const readMarker = async () => (await rt.exec(row.container_name, ["cat", marker])).stdout;
  /** OpenClaw's lease table in the state database, with `sql` run on it; prints the row count. */
  const leases = async (sql = "") =>
    (
      await rt.exec(row.container_name, [
        "node",
        "-e",
        `const { DatabaseSync } = require("node:sqlite");
         require("node:fs").mkdirSync("/home/node/.openclaw/state", { recursive: true });
         const db = new DatabaseSync("/home/node/.openclaw/state/openclaw.sqlite");
         db.exec("create table if not exists state_leases (scope text not null, lease_key text not null, owner text not null, expires_at integer, heartbeat_at integer, payload_json text, created_at integer not null, updated_at integer not null, primary key (scope, lease_key)) strict");
         ${sql}
         console.log(db.prepare("select count(*) as n from state_leases").get().n);`,
      ])
    ).stdout.trim();

  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.AGENT_GATEWAY_IMAGE = ensureHealthzImage();
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "60000";
    process.env.RECONCILE_CRON = "0 0 1 1 *";
    process.env.BACKUP_CRON = "0 0 1 1 *";
    process.env.AGENT_MESSAGE_RECORDER = "off";
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
    await startWorker({ concurrency: 1 });
    owner = await agentUser("solo");
    const agent = await createAgentRecord(owner.id, { name: "Keeper", model: "m" });
    agentId = agent.id;
    row = await ensureInstanceRecord(owner.id);
    await ensureContainer(row);
    await rt.exec(row.container_name, [
      "sh",
      "-c",
      `mkdir -p $(dirname ${marker}) && echo "- the user likes green tea" > ${marker}`,
    ]);
    await db()`insert into agent_messages (id, agent_id, user_id, sender, content, platform,
      session_key, dedupe_key, created_at)
      values ('msg_bk1', ${agentId}, ${owner.id}, 'user', 'remember green tea', 'web',
        'agent:main:web', 'd1', now())`;
    await db()`insert into channel_credentials (user_id, channel, sealed)
      values (${owner.id}, 'chatapp1', ${seal("123:bot-token-secret")})`;
  }, 240_000);

  afterAll(async () => {
    await stopWorker(5_000);
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  async function takeBackup(): Promise<{ id: string }> {
    const accepted = await asUser(owner, backupsRoute, base(agentId), {
      method: "POST",
      params: { id: agentId },
    });
    expect(accepted.status).toBe(202);
    const id = accepted.json.backup.id as string;
    return waitFor(
      async () => {
        const list = await asUser(owner, backupsRoute, base(agentId), { params: { id: agentId } });
        const found = list.json.backups.find((b: { id: string }) => b.id === id);
        if (found?.status === "failed") throw new Error(found.error);
        return found?.status === "ready" ? found : undefined;
      },
      { timeoutMs: 120_000, what: "the backup to be ready" },
    );
  }

  it("backs up the volume and records encrypted, downloads them, restores a file and a message", async () => {
    // A running gateway's owner lease, held by a process on another host: saved with the state.
    const held = `db.prepare("insert into state_leases values ('gateway', 'owner', 'o1', ?, ?, ?, 1, 1)").run(Date.now() + 300000, Date.now(), JSON.stringify({ owner: { pid: 7, host: "agent-elsewhere", startedAt: 1 }, port: 18789, mode: "foreground" }));`;
    expect(await leases(held)).toBe("1");
    // What the gateway rebuilds itself (as OpenClaw's own backup skips it) stays out.
    await rt.exec(row.container_name, [
      "sh",
      "-c",
      "cd /home/node/.openclaw && mkdir -p cache/control-ui-assets tmp/plugin-captures/p1 && echo ui > cache/control-ui-assets/index.html && echo c > tmp/plugin-captures/p1/x.js && echo kept > cache/kept.txt",
    ]);
    const backup = await takeBackup();
    expect(backup).toMatchObject({
      reason: "manual",
      sizeBytes: expect.any(Number),
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    // At rest: not the plaintext (neither the memory line nor the sealed token's envelope).
    const root = join(process.env.DATA_DIR as string, "backups");
    const files = readdirSync(root, { recursive: true, withFileTypes: true }).filter((f) =>
      f.isFile(),
    );
    const stored = Buffer.concat(files.map((f) => readFileSync(join(f.parentPath, f.name))));
    expect(stored.includes(Buffer.from("green tea"))).toBe(false);

    const download = await asUser(owner, downloadRoute, `${base(agentId)}/${backup.id}/download`, {
      params: { id: agentId, backupId: backup.id },
    });
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("application/x-tar");
    const res = await downloadRoute.loader({
      request: new Request(`http://localhost${base(agentId)}/${backup.id}/download`, {
        headers: { cookie: owner.cookie },
      }),
      params: { id: agentId, backupId: backup.id },
      context: { remoteAddress: "127.0.0.1" },
    } as never);
    const tar = await untar(Buffer.from(await res.arrayBuffer()));
    const records = JSON.parse(tar.get("records.json")?.toString() ?? "{}");
    expect(records.messages).toEqual([expect.objectContaining({ content: "remember green tea" })]);
    expect(records.channels[0].sealed).toMatch(/^v1\./); // sealed as at rest, not the token
    expect(JSON.stringify(records)).not.toContain("bot-token-secret");
    expect(tar.get("state/workspace/MEMORY.md")?.toString()).toBe("- the user likes green tea\n");
    expect(tar.get("state/cache/kept.txt")?.toString()).toBe("kept\n");
    expect(
      [...tar.keys()].filter((name) =>
        /^state\/(cache\/control-ui-assets|tmp\/plugin-captures)/.test(name),
      ),
    ).toEqual([]);

    // Things change after the backup…
    await rt.exec(row.container_name, ["sh", "-c", `echo "- forgotten" > ${marker}`]);
    await db()`delete from agent_messages where id = 'msg_bk1'`;
    const oldVolume = row.volume_name;
    // …and the restore brings them back on a fresh volume, booted and healthy.
    const restored = await asUser(owner, restoreRoute, `${base(agentId)}/${backup.id}/restore`, {
      method: "POST",
      params: { id: agentId, backupId: backup.id },
    });
    expect(restored.status, restored.text).toBe(200);
    expect(restored.json.backup.restore).toMatchObject({ status: "restored" });
    row = (await getInstance(row.id)) as InstanceRow;
    expect(row.volume_name).not.toBe(oldVolume);
    expect(await rt.volumeExists(oldVolume)).toBe(false);
    expect(await readMarker()).toBe("- the user likes green tea\n");
    // No process holds the unpacked state: its leases are gone, so no gateway waits them out.
    expect(await leases()).toBe("0");
    const mode = await rt.exec(row.container_name, ["stat", "-c", "%u %a", "/home/node/.openclaw"]);
    expect(mode.stdout).toBe("1000 700\n");
    expect((await rt.inspect(row.container_name))?.running).toBe(true);
    const [message] = await db()`select content from agent_messages where id = 'msg_bk1'`;
    expect(message?.content).toBe("remember green tea");
    // The state before the restore was kept as a backup of its own.
    const list = await asUser(owner, backupsRoute, base(agentId), { params: { id: agentId } });
    expect(list.json.backups.map((b: { reason: string }) => b.reason)).toContain("pre-restore");
  }, 300_000);

  it("refuses a restore larger than the agent's storage limit before anything changes", async () => {
    const backup = await takeBackup();
    await rt.exec(row.container_name, ["sh", "-c", `echo "- current" > ${marker}`]);
    const volume = ((await getInstance(row.id)) as InstanceRow).volume_name;
    const backups = async () =>
      (
        await db()<{ n: number }[]>`select count(*)::int as n from agent_backups
        where agent_id = ${agentId}`
      )[0]?.n;
    const before = await backups();
    await setStorageOverride(owner.id, 1024); // smaller than any gateway state (decision 0217)
    try {
      const res = await asUser(owner, restoreRoute, `${base(agentId)}/${backup.id}/restore`, {
        method: "POST",
        params: { id: agentId, backupId: backup.id },
      });
      expect(res.status).toBe(409);
      expect(res.json.error).toMatch(/larger than the agent's storage limit \(0MiB\)/);
    } finally {
      await setStorageOverride(owner.id, null);
    }
    // No safety backup, no new volume, the agent's files as they were.
    expect(await backups()).toBe(before);
    expect(((await getInstance(row.id)) as InstanceRow).volume_name).toBe(volume);
    expect(await readMarker()).toBe("- current\n");
  }, 300_000);

  it("refuses a backup whose stored bytes were altered and leaves the agent as it was", async () => {
    const backup = await takeBackup();
    await rt.exec(row.container_name, ["sh", "-c", `echo "- current" > ${marker}`]);
    const [stored] = await db()<{ object_key: string }[]>`
      select object_key from agent_backups where id = ${backup.id}`;
    const path = join(process.env.DATA_DIR as string, "backups", stored?.object_key as string);
    const bytes = readFileSync(path);
    bytes[bytes.length - 40] = (bytes[bytes.length - 40] as number) ^ 0x01;
    writeFileSync(path, bytes);
    const volume = ((await getInstance(row.id)) as InstanceRow).volume_name;
    const res = await asUser(owner, restoreRoute, `${base(agentId)}/${backup.id}/restore`, {
      method: "POST",
      params: { id: agentId, backupId: backup.id },
    });
    expect(res.status).toBe(409);
    expect(res.json.error).toMatch(/as it was.*checksum/);
    expect(((await getInstance(row.id)) as InstanceRow).volume_name).toBe(volume);
    expect(await readMarker()).toBe("- current\n");
    const download = await asUser(owner, downloadRoute, "/x", {
      params: { id: agentId, backupId: backup.id },
    });
    expect(download.status).toBe(409);
    const gone = await asUser(owner, backupRoute, "/x", {
      method: "DELETE",
      params: { id: agentId, backupId: backup.id },
    });
    expect(gone.json).toEqual({ success: true });
    expect(() => readFileSync(path)).toThrow();
  }, 300_000);

  it("copies a running gateway's files as of one instant: paused while read, running after", async () => {
    // A writer that moves two counters in step, with 32 MB between them in the tar's (sorted)
    // order: read while the writer runs, z-counter would be far ahead of a-counter.
    const state = "/home/node/.openclaw";
    const step = (name: string) =>
      `echo $i > ${state}/${name}.t && mv ${state}/${name}.t ${state}/${name}`;
    await rt.exec(row.container_name, [
      "sh",
      "-c",
      `dd if=/dev/zero of=${state}/m-filler bs=1M count=32 2>/dev/null
       (i=0; while :; do i=$((i+1)); ${step("a-counter")}; ${step("z-counter")}; done) >/dev/null 2>&1 &
       echo $! > /tmp/writer.pid`,
    ]);
    const counter = async () =>
      Number((await rt.exec(row.container_name, ["cat", `${state}/a-counter`])).stdout);
    await waitFor(async () => ((await counter()) > 0 ? true : undefined), {
      timeoutMs: 10_000,
      what: "the writer to start",
    });
    try {
      const backup = await takeBackup();
      const download = await bytesOf(
        downloadRoute,
        "/x",
        { id: agentId, backupId: backup.id },
        owner,
      );
      expect(download.status).toBe(200);
      const tar = await untar(download.bytes);
      const a = Number(tar.get("state/a-counter")?.toString());
      const z = Number(tar.get("state/z-counter")?.toString());
      expect(a).toBeGreaterThan(0);
      // Paused between the two steps at worst: z is a or one behind.
      expect(a - z, `a-counter ${a}, z-counter ${z}`).toBeGreaterThanOrEqual(0);
      expect(a - z).toBeLessThanOrEqual(1);
      // Released: the gateway runs and the writer goes on.
      expect((await rt.inspect(row.container_name))?.state).toBe("running");
      await waitFor(async () => ((await counter()) > a ? true : undefined), {
        timeoutMs: 10_000,
        what: "the writer to go on after the copy",
      });
    } finally {
      await rt.exec(row.container_name, [
        "sh",
        "-c",
        `kill $(cat /tmp/writer.pid); rm -f ${state}/m-filler ${state}/a-counter* ${state}/z-counter*`,
      ]);
    }
  }, 300_000);

  it("a copy's pause left by a dead worker: the agent's state is kept, and reconcile resumes it", async () => {
    await observe((await getInstance(row.id)) as InstanceRow);
    const before = (await getInstance(row.id)) as InstanceRow;
    expect(before.observed_state).toBe("running");
    await rt.pauseForCopy(row.container_name); // never released
    expect((await rt.inspect(row.container_name))?.state).toBe("paused");
    expect((await observe(before)).observed_state).toBe("running");
    const pass = await reconcileAll();
    expect(pass.instances[row.id]).toBe("resumed after an unfinished backup copy");
    expect((await rt.inspect(row.container_name))?.state).toBe("running");
    // Its /healthz answered reconcile's observation.
    expect(await getInstance(row.id)).toMatchObject({
      observed_state: "running",
      health: "healthy",
    });
  }, 120_000);

  it("exports a signed archive and imports it into another account's agent; refuses bad archives and changes nothing", async () => {
    const memory = await readMarker();
    const backup = await takeBackup();
    const exported = await bytesOf(
      exportRoute,
      `${base(agentId)}/${backup.id}/export`,
      { id: agentId, backupId: backup.id },
      owner,
    );
    expect(exported.status).toBe(200);
    const entries = await untar(exported.bytes);
    expect([...entries.keys()]).toEqual(["manifest.json", "manifest.sig", "payload.tar"]);
    const manifest = JSON.parse(entries.get("manifest.json")?.toString() ?? "{}");
    expect(manifest).toMatchObject({ version: 1, signer: platformPublicKey() });

    // Another account, its own agent and gateway.
    const other = await agentUser("solo");
    const target = await createAgentRecord(other.id, { name: "Heir", model: "m" });
    const otherRow = await ensureInstanceRecord(other.id);
    await ensureContainer(otherRow);
    const importInto = (bytes: Buffer) =>
      asUser(other, importRoute, `/api/agents/${target.id}/import`, {
        method: "POST",
        params: { id: target.id },
        rawBody: bytes,
        headers: { "content-type": "application/x-tar" },
      });
    const otherMarker = async () =>
      (await rt.exec(otherRow.container_name, ["sh", "-c", `cat ${marker} 2>&1 || true`])).stdout;
    const before = await otherMarker();
    const { privateKey: stranger } = generateKeyPairSync("ed25519");
    const strangerKey = Buffer.from(
      createPublicKey(stranger).export({ format: "der", type: "spki" }).subarray(-32),
    ).toString("base64url");
    const tampered = Buffer.from(exported.bytes);
    tampered[tampered.length - 3000] = (tampered[tampered.length - 3000] as number) ^ 0x01;
    const cases: Array<[string, Buffer, number, RegExp]> = [
      ["tampered", tampered, 400, /altered/],
      [
        "truncated",
        exported.bytes.subarray(0, Math.floor(exported.bytes.length / 2)),
        400,
        /truncated/,
      ],
      [
        "unknown version",
        await forgedArchive({ ...manifest, version: 2 }, stranger),
        400,
        /Unknown archive version 2/,
      ],
      [
        "untrusted signer",
        await forgedArchive({ ...manifest, signer: strangerKey }, stranger),
        400,
        /does not trust/,
      ],
      ["not an archive", Buffer.from("hello"), 400, /truncated or malformed|Not an agent export/],
    ];
    for (const [what, bytes, status, error] of cases) {
      const res = await importInto(bytes);
      expect(res.status, what).toBe(status);
      expect(res.json.error, what).toMatch(error);
    }
    process.env.EXPORT_MAX_BYTES = String(exported.bytes.length - 1);
    resetEnvCache();
    const tooLarge = await importInto(exported.bytes);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.json.error).toMatch(/too large/);
    delete process.env.EXPORT_MAX_BYTES;
    resetEnvCache();
    // Nothing changed: no backup kept, the gateway's state and records as they were.
    const kept = await db()`select 1 from agent_backups where agent_id = ${target.id}`;
    expect(kept.length).toBe(0);
    expect(await otherMarker()).toBe(before);

    const imported = await importInto(exported.bytes);
    expect(imported.status, imported.text).toBe(200);
    expect(await otherMarker()).toBe(memory);
    const [message] = await db()<{ id: string }[]>`
      select id from agent_messages where agent_id = ${target.id} and content = 'remember green tea'`;
    expect(message?.id).toMatch(/^msg_/);
    expect(message?.id).not.toBe("msg_bk1");
    const [agentRow] = await db()<
      { name: string }[]
    >`select name from agents where id = ${target.id}`;
    expect(agentRow?.name).toBe("Keeper");
  }, 300_000);

  it("an export leaves channel credentials behind and names them; an import brings none, also from a hand-made archive", async () => {
    const TELEGRAM = "123:bot-token-secret"; // the owner's chatapp1, stored in beforeAll
    const DISCORD = "discord-bot-token-secret";
    const WHATSAPP = "whatsapp-noise-key-secret";
    const secrets = [TELEGRAM, DISCORD, WHATSAPP];
    await db()`insert into channel_credentials (user_id, channel, sealed)
      values (${owner.id}, 'chatapp2', ${seal(DISCORD)}) on conflict do nothing`;
    // The gateway's state as it is with Telegram, Discord and a linked WhatsApp.
    const config = JSON.stringify({
      gateway: { mode: "local" },
      channels: {
        telegram: { enabled: true, botToken: TELEGRAM },
        discord: { enabled: true, token: DISCORD },
        whatsapp: { enabled: true },
      },
    });
    const state = "/home/node/.openclaw";
    await rt.exec(row.container_name, [
      "sh",
      "-c",
      `mkdir -p ${state}/credentials/whatsapp/default &&
       printf '%s' '${config}' > ${state}/openclaw.json &&
       printf '%s' '${config}' > ${state}/openclaw.json.bak &&
       printf '%s' '{"noiseKey":"${WHATSAPP}"}' > ${state}/credentials/whatsapp/default/creds.json`,
    ]);
    const backup = await takeBackup();
    const exported = await bytesOf(
      exportRoute,
      `${base(agentId)}/${backup.id}/export`,
      { id: agentId, backupId: backup.id },
      owner,
    );
    expect(exported.status).toBe(200);
    const entries = await untar(exported.bytes);
    const manifest = JSON.parse(entries.get("manifest.json")?.toString() ?? "{}");
    expect(manifest.channelsToReconnect).toEqual(["chatapp1", "chatapp2", "chatapp3"]);
    const payload = await untar(entries.get("payload.tar") as Buffer);
    for (const secret of secrets) {
      expect(exported.bytes.includes(Buffer.from(secret)), secret).toBe(false);
    }
    expect(JSON.parse(payload.get("records.json")?.toString() ?? "{}").channels).toEqual([]);
    expect(JSON.parse(payload.get("state/openclaw.json")?.toString() ?? "{}")).toEqual({
      gateway: { mode: "local" },
    });
    expect([...payload.keys()].filter((n) => /credentials|openclaw\.json\./.test(n))).toEqual([]);
    // The backup itself keeps them: a restore of one's own agent brings its channels back.
    const download = await bytesOf(
      downloadRoute,
      "/x",
      { id: agentId, backupId: backup.id },
      owner,
    );
    const kept = await untar(download.bytes);
    expect(JSON.parse(kept.get("records.json")?.toString() ?? "{}").channels).toHaveLength(2);

    // Another account imports it: no token arrives, in its records or its gateway's volume.
    const other = await agentUser("solo");
    const target = await createAgentRecord(other.id, { name: "Heir", model: "m" });
    const otherRow = await ensureInstanceRecord(other.id);
    await ensureContainer(otherRow);
    const importInto = (bytes: Buffer) =>
      asUser(other, importRoute, `/api/agents/${target.id}/import`, {
        method: "POST",
        params: { id: target.id },
        rawBody: bytes,
        headers: { "content-type": "application/x-tar" },
      });
    const leftInVolume = async () => {
      const current = (await getInstance(otherRow.id)) as InstanceRow;
      const found = await rt.exec(current.container_name, [
        "sh",
        "-c",
        `grep -rl ${secrets.map((x) => `-e '${x}'`).join(" ")} ${state} ; ls ${state}/credentials 2>&1 ; true`,
      ]);
      return found.stdout;
    };
    const expectNoCredentials = async () => {
      const rows = await db()`select channel from channel_credentials where user_id = ${other.id}`;
      expect(rows).toEqual([]);
      expect(await channelCredentialFlags(other.id)).toEqual({
        chatapp1: false,
        chatapp2: false,
        chatapp3: false,
      });
      expect(await leftInVolume()).toMatch(/^ls: .*No such file or directory\n$/);
    };
    const imported = await importInto(exported.bytes);
    expect(imported.status, imported.text).toBe(200);
    await expectNoCredentials();

    // A hand-made archive (signed by a platform this one trusts) that carries them anyway:
    // records with tokens sealed under this installation's key, and the gateway's files.
    const { privateKey: maker } = generateKeyPairSync("ed25519");
    const makerKey = Buffer.from(
      createPublicKey(maker).export({ format: "der", type: "spki" }).subarray(-32),
    ).toString("base64url");
    const records = {
      version: RECORDS_VERSION,
      agent: {
        id: "agt_handmade",
        name: "Smuggler",
        gateway_agent_id: "main",
        model: "m",
        tier: "solo",
        config: {},
      },
      activeSession: null,
      channels: [
        { channel: "chatapp1", sealed: seal(TELEGRAM), details: {} },
        { channel: "chatapp2", sealed: seal(DISCORD), details: {} },
      ],
      messages: [],
    };
    const owned = { uid: 1000, gid: 1000 };
    const payloadTar = pack();
    payloadTar.entry({ name: "records.json", mode: 0o600 }, JSON.stringify(records));
    payloadTar.entry({ name: "state", type: "directory", mode: 0o700, ...owned });
    payloadTar.entry({ name: "state/openclaw.json", mode: 0o600, ...owned }, config);
    payloadTar.entry({ name: "state/credentials", type: "directory", mode: 0o700, ...owned });
    payloadTar.entry({
      name: "state/credentials/whatsapp",
      type: "directory",
      mode: 0o700,
      ...owned,
    });
    payloadTar.entry(
      { name: "state/credentials/whatsapp/creds.json", mode: 0o600, ...owned },
      `{"noiseKey":"${WHATSAPP}"}`,
    );
    payloadTar.finalize();
    const payloadChunks: Buffer[] = [];
    for await (const chunk of payloadTar) payloadChunks.push(chunk as Buffer);
    const payloadBytes = Buffer.concat(payloadChunks);
    const handMade = {
      format: manifest.format,
      version: 1,
      createdAt: new Date().toISOString(),
      agent: { name: "Smuggler", model: "m" },
      payload: {
        bytes: payloadBytes.length,
        sha256: createHash("sha256").update(payloadBytes).digest("hex"),
      },
      signer: makerKey,
    };
    const manifestBytes = Buffer.from(JSON.stringify(handMade));
    const archive = pack();
    archive.entry({ name: "manifest.json" }, manifestBytes);
    archive.entry(
      { name: "manifest.sig" },
      Buffer.from(sign(null, manifestBytes, maker).toString("base64url")),
    );
    archive.entry({ name: "payload.tar" }, payloadBytes);
    archive.finalize();
    const archiveChunks: Buffer[] = [];
    for await (const chunk of archive) archiveChunks.push(chunk as Buffer);
    process.env.EXPORT_TRUSTED_KEYS = makerKey;
    resetEnvCache();
    try {
      const smuggled = await importInto(Buffer.concat(archiveChunks));
      expect(smuggled.status, smuggled.text).toBe(200);
    } finally {
      delete process.env.EXPORT_TRUSTED_KEYS;
      resetEnvCache();
    }
    const [renamed] = await db()<
      { name: string }[]
    >`select name from agents where id = ${target.id}`;
    expect(renamed?.name).toBe("Smuggler"); // the archive was imported …
    await expectNoCredentials(); // … without a token
  }, 300_000);

  it("backs up an agent before its deletion; the backup stays listable and exportable, not restorable", async () => {
    const leaving = await agentUser("solo");
    const agent = await createAgentRecord(leaving.id, { name: "Leaving", model: "m" });
    const leavingRow = await ensureInstanceRecord(leaving.id);
    await ensureContainer(leavingRow);
    await rt.exec(leavingRow.container_name, [
      "sh",
      "-c",
      `mkdir -p $(dirname ${marker}) && echo "- last words" > ${marker}`,
    ]);
    await db()`insert into agent_messages (id, agent_id, user_id, sender, content, platform,
      session_key, dedupe_key, created_at)
      values ('msg_bye', ${agent.id}, ${leaving.id}, 'user', 'goodbye', 'web', 'agent:main:web',
        'bye', now())`;
    expect(await deleteAgent(leaving.id, agent.id)).toMatchObject({ instanceRemoved: true });
    // The teardown takes the backup before it removes the volume.
    const backup = await waitFor(
      async () => {
        const list = await asUser(leaving, backupsRoute, base(agent.id), {
          params: { id: agent.id },
        });
        const found = list.json?.backups?.[0];
        if (found?.status === "failed") throw new Error(found.error);
        return found?.status === "ready" ? found : undefined;
      },
      { timeoutMs: 120_000, what: "the pre-delete backup" },
    );
    expect(backup.reason).toBe("pre-delete");
    await waitFor(async () => !(await rt.volumeExists(leavingRow.volume_name)), {
      what: "the volume to be removed",
    });
    const download = await bytesOf(
      downloadRoute,
      `${base(agent.id)}/${backup.id}/download`,
      { id: agent.id, backupId: backup.id },
      leaving,
    );
    const files = await untar(download.bytes);
    expect(files.get("state/workspace/MEMORY.md")?.toString()).toBe("- last words\n");
    const records = JSON.parse(files.get("records.json")?.toString() ?? "{}");
    expect(records.messages).toEqual([expect.objectContaining({ content: "goodbye" })]);
    const [cleared] = await db()`select records from agent_backups where id = ${backup.id}`;
    expect(cleared?.records).toBeNull();
    const restore = await asUser(leaving, restoreRoute, "/x", {
      method: "POST",
      params: { id: agent.id, backupId: backup.id },
    });
    expect(restore.status).toBe(409);
    expect(restore.json.error).toMatch(/deleted: export this backup/);
    const exported = await bytesOf(
      exportRoute,
      "/x",
      { id: agent.id, backupId: backup.id },
      leaving,
    );
    expect(exported.status).toBe(200);
    const exportedManifest = JSON.parse(
      (await untar(exported.bytes)).get("manifest.json")?.toString() ?? "{}",
    );
    expect(exportedManifest.agent).toEqual({ name: "Leaving", model: "m" });
    // Still nobody else's.
    const intruder = await agentUser("solo");
    const foreign = await asUser(intruder, backupsRoute, base(agent.id), {
      params: { id: agent.id },
    });
    expect(foreign.status).toBe(404);
  }, 300_000);

  it("clone: a full tier answers 429 with {error} and creates nothing", async () => {
    const res = await asUser(owner, cloneRoute, `/api/agents/${agentId}/clone`, {
      method: "POST",
      params: { id: agentId },
      body: { name: "Twin" },
    });
    expect(res.status).toBe(429);
    expect(res.json).toEqual({ error: expect.stringMatching(/Agent limit reached/) });
    const names = await db()<
      { name: string }[]
    >`select name from agents where user_id = ${owner.id}`;
    expect(names.map((n) => n.name)).not.toContain("Twin");
  });

  it("undoes a restore whose worker died part-way: back on the old volume, marked failed", async () => {
    const backup = await takeBackup();
    row = (await getInstance(row.id)) as InstanceRow;
    const old = row.volume_name;
    await rt.exec(row.container_name, ["sh", "-c", `echo "- before the crash" > ${marker}`]);
    // What a worker killed after moving the gateway onto the fresh volume leaves: the backup
    // running with no job, the instance on a half-restored volume.
    const fresh = `${old}-crashed1`;
    await rt.ensureVolume(fresh, { "agent-platform.deployment": testRun });
    await db()`update agent_backups set restore_status = 'running',
      restore_started_at = now() - interval '5 minutes', restore_old_volume = ${old},
      restore_new_volume = ${fresh} where id = ${backup.id}`;
    await db()`update instances set volume_name = ${fresh} where id = ${row.id}`;
    await ensureContainer((await getInstance(row.id)) as InstanceRow, { recreate: true });
    expect(await readMarker().catch(() => "")).not.toBe("- before the crash\n");

    const pass = await reconcileAll();
    expect(pass.restoresRecovered).toEqual([backup.id]);
    const list = await asUser(owner, backupsRoute, base(agentId), { params: { id: agentId } });
    const after = list.json.backups.find((b: { id: string }) => b.id === backup.id);
    expect(after.restore).toMatchObject({ status: "failed", error: INTERRUPTED });
    row = (await getInstance(row.id)) as InstanceRow;
    expect(row.volume_name).toBe(old);
    expect(await rt.volumeExists(fresh)).toBe(false);
    await waitFor(async () => (await rt.inspect(row.container_name))?.running, {
      what: "the gateway back on its old volume",
    });
    expect(await readMarker()).toBe("- before the crash\n");
    // Recovered once: a later pass finds nothing to undo.
    expect((await reconcileAll()).restoresRecovered).toEqual([]);
  }, 300_000);

  it("updates to the pinned image and refuses a blocked OpenClaw version without touching the gateway", async () => {
    const blockedTag = `agent-platform-test-${testRun}:2026.1.1`;
    buildImage(blockedTag, HEALTHZ_IMAGE, [`LABEL agent-platform.test-build=${testRun}`]);
    const operator = { type: "operator" as const, id: owner.id, userId: owner.id };
    try {
      await setGatewayVersionPolicy({ pinnedImage: blockedTag, blockedVersions: [] }, operator);
      process.env.GATEWAY_BLOCKED_VERSIONS = "2026.1.1";
      resetEnvCache();
      const before = await rt.inspect(row.container_name);
      const refused = await updateImage(row.id);
      expect(refused).toEqual({
        failed: expect.stringMatching(/refused: OpenClaw 2026\.1\.1 .* is blocked/),
      });
      const after = await rt.inspect(row.container_name);
      expect(after?.id).toBe(before?.id);
      expect(after?.running).toBe(true);
      // Pinning a blocked version is refused too.
      await expect(
        setGatewayVersionPolicy({ pinnedImage: blockedTag, blockedVersions: [] }, operator),
      ).rejects.toThrow(/blocked/);
      delete process.env.GATEWAY_BLOCKED_VERSIONS;
      resetEnvCache();
      // Unblocked, the update goes to the operator's pin, not AGENT_GATEWAY_IMAGE.
      expect(await updateImage(row.id)).toMatchObject({ updated: blockedTag });
    } finally {
      delete process.env.GATEWAY_BLOCKED_VERSIONS;
      await db()`delete from gateway_version_policy`;
      resetEnvCache();
      await updateImage(row.id);
      removeImages(blockedTag);
    }
  }, 300_000);

  it("a backup of an instance with no state volume fails clearly and creates none", async () => {
    const bare = await agentUser("solo");
    const agent = await createAgentRecord(bare.id, { name: "Unstarted", model: "m" });
    const bareRow = await ensureInstanceRecord(bare.id);
    const pending = await insertPendingBackup(agent, "scheduled");
    expect(await runBackupJob(pending.id)).toEqual({ failed: "no state volume" });
    const [stored] = await db()`select status, error from agent_backups where id = ${pending.id}`;
    expect(stored).toEqual({
      status: "failed",
      error: expect.stringMatching(/state volume does not exist/),
    });
    expect(await rt.volumeExists(bareRow.volume_name)).toBe(false);
  });

  it("backs up every agent before an update", async () => {
    const tag = `agent-platform-test-backup:${testRun}`;
    buildImage(tag, HEALTHZ_IMAGE, [`LABEL agent-platform.test-build=${testRun}`]);
    process.env.AGENT_GATEWAY_IMAGE = tag;
    resetEnvCache();
    try {
      const result = await updateImage(row.id);
      expect(result).toMatchObject({ updated: tag });
      const [pre] = await db()<{ status: string }[]>`
        select status from agent_backups where agent_id = ${agentId} and reason = 'pre-update'`;
      expect(pre?.status).toBe("ready");
    } finally {
      process.env.AGENT_GATEWAY_IMAGE = HEALTHZ_IMAGE;
      resetEnvCache();
      await cleanupTestObjects(rt);
      removeImages(tag);
    }
  }, 300_000);
});
