import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, open, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract, pack } from "tar-stream";
import { z } from "zod";
import { backupStore, digest } from "../platform/backup-store.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { randomAlphanumeric } from "../platform/ids.server.ts";
import { openStream, sealStream } from "../platform/sealed-stream.server.ts";
import {
  platformPublicKey,
  signBytes,
  trustedKeys,
  verifyBytes,
} from "../platform/signing.server.ts";
import { getOwnedAgent } from "./agents.server.ts";
import { withoutChannelCredentials } from "./archive-credentials.server.ts";
import { agentRecordsSchema } from "./backup-records.server.ts";
import {
  type BackupRow,
  completeBackup,
  getBackup,
  insertPendingBackup,
  ownedBackup,
  readStored,
  removeBackup,
  requestRestore,
} from "./backups.server.ts";
import { CHANNELS } from "./channels.server.ts";

// Agent export and import (decision 0141): a portable, versioned, signed archive of a backup —
// a tar of manifest.json, manifest.sig (Ed25519 over the manifest's bytes) and payload.tar (the
// backup's records and state, as a download gives them, less every channel credential). The
// manifest names the payload's size and sha256, so the signature covers the payload, and the
// channels to connect again. An import checks everything before it changes anything, leaves out
// any channel credential a hand-made archive carries, then goes through the restore path (fresh
// volume, verified, or nothing). Decisions 0141, 0200.

export const ARCHIVE_FORMAT = "agent-platform-agent-export";
export const ARCHIVE_VERSION = 1;
const MANIFEST_MAX_BYTES = 64 * 1024;

const manifestSchema = z.object({
  format: z.literal(ARCHIVE_FORMAT),
  version: z.number().int(),
  createdAt: z.string(),
  agent: z.object({ name: z.string(), model: z.string() }),
  payload: z.object({ bytes: z.number().int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/) }),
  signer: z.string(),
  /**
   * Channels the agent had set up whose credentials stayed behind (decision 0200): connect them
   * again after an import. Optional: archives made before it do not name them.
   */
  channelsToReconnect: z.array(z.enum(CHANNELS)).optional(),
});
type Manifest = z.infer<typeof manifestSchema>;

const tmpDir = () => join(env().DATA_DIR, "backups-tmp");
async function tmpFile(suffix: string): Promise<string> {
  await mkdir(tmpDir(), { recursive: true, mode: 0o700 });
  return join(tmpDir(), `${randomAlphanumeric(16)}.${suffix}`);
}

/** The ready backup of the user's agent as a signed archive (a download). */
export async function exportBackup(userId: string, agentId: string, backupId: string) {
  const row = await ownedBackup(userId, agentId, backupId);
  if (row.status !== "ready") throw new DomainError(409, `The backup is ${row.status}, not ready`);
  // A deleted agent's backup is exportable too: its name and model then come from the backup.
  const [agent] = await db()<{ name: string; model: string }[]>`
    select name, model from agents where id = ${agentId}`;
  const storedPath = await tmpFile("stored");
  const payloadPath = await tmpFile("payload");
  try {
    await pipeline(
      Readable.from(openStream(await readStored(row))),
      createWriteStream(storedPath, { mode: 0o600 }),
    );
    // The backup keeps the channel credentials (a restore needs them); the export does not.
    const channelsToReconnect = await withoutChannelCredentials(storedPath, payloadPath);
    await rm(storedPath, { force: true });
    const { sha256, bytes } = await digest(createReadStream(payloadPath));
    const manifest: Manifest = {
      format: ARCHIVE_FORMAT,
      version: ARCHIVE_VERSION,
      createdAt: new Date().toISOString(),
      agent: agent ?? (await recordedAgent(row)),
      payload: { bytes, sha256 },
      signer: platformPublicKey(),
      channelsToReconnect,
    };
    const manifestBytes = Buffer.from(JSON.stringify(manifest));
    const archive = pack();
    archive.entry({ name: "manifest.json", size: manifestBytes.length }, manifestBytes);
    const signature = Buffer.from(signBytes(manifestBytes));
    archive.entry({ name: "manifest.sig", size: signature.length }, signature);
    const entry = archive.entry({ name: "payload.tar", size: bytes });
    pipeline(createReadStream(payloadPath), entry)
      .then(() => archive.finalize())
      .catch((error: Error) => archive.destroy(error))
      .finally(() => rm(payloadPath, { force: true }));
    const body = Readable.toWeb(Readable.from(archive)) as ReadableStream<Uint8Array>;
    return new Response(body, {
      headers: {
        "content-type": "application/x-tar",
        "content-disposition": `attachment; filename="${agentId}-${row.id}.agent-export.tar"`,
        "cache-control": "no-store",
      },
    });
  } catch (error) {
    await Promise.all([storedPath, payloadPath].map((p) => rm(p, { force: true })));
    throw error;
  }
}

/** The agent's name and model as the backup recorded them. */
async function recordedAgent(row: BackupRow): Promise<{ name: string; model: string }> {
  const extractor = extract();
  const reading = pipeline(Readable.from(openStream(await readStored(row))), extractor);
  reading.catch(() => {});
  for await (const entry of extractor) {
    if (entry.header.name !== "records.json") break;
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    const records = agentRecordsSchema.parse(JSON.parse(Buffer.concat(chunks).toString("utf8")));
    extractor.destroy();
    return { name: records.agent.name, model: records.agent.model };
  }
  extractor.destroy();
  return { name: row.agent_id, model: "" };
}

const refuse = (message: string) => new DomainError(400, message);

/** The request body into a file, refused (413) past EXPORT_MAX_BYTES without reading it all. */
async function receive(request: Request, path: string): Promise<number> {
  const max = env().EXPORT_MAX_BYTES;
  const declared = Number(request.headers.get("content-length") ?? "0");
  const tooLarge = () => new DomainError(413, `Archive too large: at most ${max} bytes`);
  if (declared > max) throw tooLarge();
  if (!request.body) throw refuse("Send the archive as the request body");
  const file = await open(path, "w", 0o600);
  const body = request.body.getReader();
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await body.read();
      if (done) break;
      size += value.length;
      if (size > max) throw tooLarge();
      await file.write(value);
    }
  } finally {
    await body.cancel().catch(() => {});
    await file.close();
  }
  if (size === 0) throw refuse("Send the archive as the request body");
  return size;
}

/** Reads and checks the archive at `path`; writes its payload to `payloadPath`. */
async function unpackArchive(path: string, payloadPath: string): Promise<Manifest> {
  const reader = extract();
  const reading = pipeline(createReadStream(path), reader);
  // Its failure (a truncated tar) is also the loop's; awaited below, never left unhandled.
  reading.catch(() => {});
  let manifestBytes: Buffer | undefined;
  let signature: string | undefined;
  let manifest: Manifest | undefined;
  let payload = false;
  try {
    for await (const entry of reader) {
      const name = entry.header.name;
      if (name === "manifest.json" && !manifestBytes) {
        if ((entry.header.size ?? 0) > MANIFEST_MAX_BYTES)
          throw refuse("Archive manifest is too large");
        const chunks: Buffer[] = [];
        for await (const chunk of entry) chunks.push(chunk as Buffer);
        manifestBytes = Buffer.concat(chunks);
        let parsed: unknown;
        try {
          parsed = JSON.parse(manifestBytes.toString("utf8"));
        } catch {
          throw refuse("Archive manifest is not JSON");
        }
        const shape = z.object({ format: z.string(), version: z.unknown() }).safeParse(parsed);
        if (!shape.success || shape.data.format !== ARCHIVE_FORMAT) {
          throw refuse("Not an agent export archive");
        }
        if (shape.data.version !== ARCHIVE_VERSION) {
          throw refuse(
            `Unknown archive version ${JSON.stringify(shape.data.version)}: this platform reads version ${ARCHIVE_VERSION}`,
          );
        }
        const full = manifestSchema.safeParse(parsed);
        if (!full.success) throw refuse("Archive manifest is malformed");
        manifest = full.data;
      } else if (name === "manifest.sig" && manifestBytes && !signature) {
        const chunks: Buffer[] = [];
        for await (const chunk of entry) chunks.push(chunk as Buffer);
        signature = Buffer.concat(chunks).toString("utf8").trim();
        if (!manifest || !trustedKeys().includes(manifest.signer)) {
          throw refuse("Archive is signed by a platform this one does not trust");
        }
        if (!verifyBytes(manifestBytes, signature, manifest.signer)) {
          throw refuse("Archive signature does not verify: it was altered");
        }
      } else if (name === "payload.tar" && signature && manifest && !payload) {
        await pipeline(entry, createWriteStream(payloadPath, { mode: 0o600 }));
        payload = true;
      } else {
        throw refuse(`Unexpected entry in the archive: ${name.slice(0, 100)}`);
      }
    }
    await reading;
  } catch (error) {
    reader.destroy();
    await reading.catch(() => {});
    if (error instanceof DomainError) throw error;
    throw refuse("Archive is truncated or malformed");
  }
  if (!manifest || !payload) throw refuse("Archive is truncated: entries are missing");
  const actual = await digest(createReadStream(payloadPath));
  if (actual.bytes !== manifest.payload.bytes || actual.sha256 !== manifest.payload.sha256) {
    throw refuse("Archive payload does not match its signed manifest: altered or truncated");
  }
  return manifest;
}

/**
 * Imports an archive into the user's agent: checked whole (size, format, version, signature,
 * payload hash) before anything changes, kept as an `imported` backup, then restored through
 * the restore path. A refused archive or a failed restore leaves everything as it was.
 */
export async function importArchive(userId: string, agentId: string, request: Request) {
  const agent = await getOwnedAgent(userId, agentId);
  const archivePath = await tmpFile("import");
  const payloadPath = await tmpFile("payload");
  const cleanPath = await tmpFile("clean");
  const sealedPath = await tmpFile("sealed");
  let backup: BackupRow | undefined;
  try {
    await receive(request, archivePath);
    await unpackArchive(archivePath, payloadPath);
    // Whatever channel credential a hand-made (or older) archive carries stays out.
    await withoutChannelCredentials(payloadPath, cleanPath);
    backup = await insertPendingBackup(agent, "imported");
    await pipeline(
      Readable.from(sealStream(createReadStream(cleanPath))),
      createWriteStream(sealedPath, { mode: 0o600 }),
    );
    const { sha256 } = await digest(createReadStream(sealedPath));
    const { size } = await stat(sealedPath);
    await backupStore().putFile(backup.object_key, sealedPath);
    await completeBackup(backup.id, size, sha256);
    const restored = await requestRestore(userId, agentId, backup.id);
    return restored;
  } catch (error) {
    // A refused or failed import leaves nothing behind (its restore already put the old back).
    if (backup) {
      const row = await getBackup(backup.id);
      if (row && row.restore_status !== "running") await removeBackup(row);
    }
    throw error;
  } finally {
    await Promise.all(
      [archivePath, payloadPath, cleanPath, sealedPath].map((p) => rm(p, { force: true })),
    );
  }
}
