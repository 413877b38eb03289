import { existsSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { extract, pack } from "tar-stream";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { getBackup, insertPendingBackup } from "../../app/server/agents/backups.server.ts";
import {
  ensureInstanceRecord,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import {
  BackupMissingError,
  backupStore,
  readVerified,
} from "../../app/server/platform/backup-store.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { openStream } from "../../app/server/platform/sealed-stream.server.ts";
import { waitingForLocks } from "../../app/server/platform/session-lock.server.ts";
import { runBackupJob } from "../../worker/instances/backup.ts";
import { tryInstanceLock } from "../../worker/instances/lock.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { type HoldingProxy, holdingProxy } from "../helpers/holding-proxy.ts";
import { type S3Server, startS3Server } from "../helpers/s3-server.ts";
import {
  cleanupTestObjects,
  describeDocker,
  GATEWAY_IMAGE,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";
import { agentUser } from "./support.ts";

// The backup-agent job stores its copy after the instance lock is let go: an upload held at the
// network (a relay in front of a real S3-compatible server) keeps no wake or update waiting.
// The instance's volume is real; no gateway runs on it (nothing to pause, no boot to wait for).

describeDocker("backup-agent job: the upload runs outside the instance lock", () => {
  const rt = new DockerRuntime();
  let s3: S3Server;
  let proxy: HoldingProxy | undefined;
  let row: InstanceRow;
  let agent: { id: string; user_id: string };

  beforeAll(async () => {
    s3 = await startS3Server();
    Object.assign(process.env, {
      RUNTIME_DEPLOYMENT: testRun,
      AGENT_GATEWAY_IMAGE: GATEWAY_IMAGE, // the volume helper's image; never started
      BACKUP_STORE: "s3",
      BACKUP_S3_BUCKET: "backups",
      BACKUP_S3_ACCESS_KEY_ID: "S3RVER",
      BACKUP_S3_SECRET_ACCESS_KEY: "S3RVER",
      BACKUP_S3_FORCE_PATH_STYLE: "true",
    });
    setRuntime(rt);
    const owner = await agentUser("solo");
    agent = await createAgentRecord(owner.id, { name: "Keeper", model: "m" });
    row = await ensureInstanceRecord(owner.id);
    await rt.ensureVolume(row.volume_name, { "agent-platform.deployment": testRun });
    const files = pack();
    files.entry({ name: "state/workspace/MEMORY.md" }, "- the user likes green tea\n");
    files.finalize();
    await rt.importVolume(row.volume_name, GATEWAY_IMAGE, Readable.from(files));
  }, 120_000);

  afterEach(async () => {
    await proxy?.close();
  });

  afterAll(async () => {
    setRuntime(undefined);
    await cleanupTestObjects(rt);
    await s3.close();
  });

  /** A fresh relay to s3rver, held, and the store pointed at it. */
  async function heldStore(): Promise<HoldingProxy> {
    proxy = await holdingProxy(s3.port);
    process.env.BACKUP_S3_ENDPOINT = `http://127.0.0.1:${proxy.port}`;
    resetEnvCache();
    return proxy;
  }

  const tempFile = (id: string) =>
    join(process.env.DATA_DIR as string, "backups-tmp", `${id}.part`);
  const lockIsFree = async () => (await tryInstanceLock(row.id, async () => true)) === true;

  it("lets go of the lock once copied; ready with the stored object's size and sha256 once the upload goes through", async () => {
    const held = await heldStore();
    const pending = await insertPendingBackup(agent, "manual");
    const job = runBackupJob(pending.id);
    await waitFor(async () => held.received() > 0, { what: "the upload to reach the relay" });

    // The upload waits at the network; the lock is free for a wake or an update meanwhile.
    expect(await lockIsFree()).toBe(true);
    expect(await getBackup(pending.id)).toMatchObject({ status: "pending" });
    expect(existsSync(tempFile(pending.id))).toBe(true);
    // A second delivery of the job (an expired one handed out again) waits on the backup's own
    // lock, not copying over the temp file being uploaded.
    const again = runBackupJob(pending.id);
    await waitFor(async () => waitingForLocks() > 0, {
      what: "the second delivery waiting on the backup's lock",
    });

    held.release();
    const result = await job;
    expect(await again).toEqual(result);
    const done = await getBackup(pending.id);
    expect(done).toMatchObject({ status: "ready", error: null });
    expect(result).toEqual({
      backupId: pending.id,
      sizeBytes: Number(done?.size_bytes),
      sha256: done?.sha256,
    });
    expect(existsSync(tempFile(pending.id))).toBe(false);
    // What s3rver holds is that object: its checksum and length, and the volume inside.
    const chunks: Buffer[] = [];
    const stored = await readVerified(backupStore(), pending.object_key, done?.sha256 as string);
    for await (const chunk of stored) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).length).toBe(Number(done?.size_bytes));
    const files = new Map<string, string>();
    const reader = extract();
    Readable.from(openStream(Readable.from(chunks))).pipe(reader);
    for await (const entry of reader) {
      const body: Buffer[] = [];
      for await (const chunk of entry) body.push(chunk as Buffer);
      files.set(entry.header.name, Buffer.concat(body).toString());
    }
    expect(files.get("state/workspace/MEMORY.md")).toBe("- the user likes green tea\n");
    // A second delivery of the job finds it ready and takes nothing again.
    expect(await runBackupJob(pending.id)).toEqual(result);
  }, 120_000);

  it("an upload the network drops: the backup failed, its temp file gone, the lock free", async () => {
    const held = await heldStore();
    const pending = await insertPendingBackup(agent, "manual");
    const job = runBackupJob(pending.id);
    const outcome = job.then(
      () => undefined,
      (error: Error) => error,
    );
    await waitFor(async () => held.received() > 0, { what: "the upload to reach the relay" });
    expect(await lockIsFree()).toBe(true);

    held.cut();
    const error = await outcome;
    expect(error).toBeInstanceOf(Error);
    const failed = await getBackup(pending.id);
    expect(failed).toMatchObject({ status: "failed", error: (error as Error).message });
    expect(existsSync(tempFile(pending.id))).toBe(false);
    expect(await lockIsFree()).toBe(true);
    // s3rver itself (past the relay) has no object under the key.
    process.env.BACKUP_S3_ENDPOINT = `http://127.0.0.1:${s3.port}`;
    resetEnvCache();
    await expect(backupStore().get(pending.object_key)).rejects.toBeInstanceOf(BackupMissingError);
  }, 120_000);
});
