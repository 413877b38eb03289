import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { env } from "./env.server.ts";

// Where backups live: one interface, two drivers — a local folder (default, DATA_DIR/backups)
// and S3-compatible object storage. Objects are opaque (already encrypted by the caller); the
// store keeps bytes and the caller keeps their sha256, which `readVerified` checks before a byte
// is handed on.

export interface BackupStore {
  readonly driver: "local" | "s3";
  /** Stores a finished local file under `key` (moved or uploaded). */
  putFile(key: string, path: string): Promise<void>;
  /** The object's bytes; throws BackupMissingError when there is none. */
  get(key: string): Promise<Readable>;
  /** Removes the object; a missing one is not an error. */
  delete(key: string): Promise<void>;
  /** Removes every object under `prefix` (an erased account's backups). */
  deletePrefix(prefix: string): Promise<void>;
}

export class BackupMissingError extends Error {
  constructor(key: string) {
    super(`backup object ${key} is missing from the store`);
    this.name = "BackupMissingError";
  }
}

export class BackupChecksumError extends Error {
  constructor() {
    super("the stored backup does not match its checksum (corrupted or altered)");
    this.name = "BackupChecksumError";
  }
}

const safeKey = (key: string) => {
  if (!/^[A-Za-z0-9_/.-]+$/.test(key) || key.includes("..")) throw new Error("bad backup key");
  return key;
};

export class LocalBackupStore implements BackupStore {
  readonly driver = "local" as const;
  readonly root: string;
  constructor(root: string) {
    this.root = root;
  }
  path(key: string): string {
    return join(resolve(this.root), safeKey(key));
  }
  async putFile(key: string, path: string): Promise<void> {
    const target = this.path(key);
    await mkdir(dirname(target), { recursive: true, mode: 0o700 });
    try {
      await rename(path, target);
    } catch {
      // Another filesystem: copy, then drop the temporary file.
      await pipeline(createReadStream(path), createWriteStream(target, { mode: 0o600 }));
      await rm(path, { force: true });
    }
  }
  async get(key: string): Promise<Readable> {
    const path = this.path(key);
    if (!(await stat(path).catch(() => undefined))) throw new BackupMissingError(key);
    return createReadStream(path);
  }
  async delete(key: string): Promise<void> {
    await rm(this.path(key), { force: true });
  }
  async deletePrefix(prefix: string): Promise<void> {
    await rm(this.path(prefix), { recursive: true, force: true });
  }
}

export interface S3StoreOptions {
  endpoint?: string;
  region: string;
  bucket: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
  prefix?: string;
}

export class S3BackupStore implements BackupStore {
  readonly driver = "s3" as const;
  readonly client: S3Client;
  readonly options: S3StoreOptions;
  constructor(options: S3StoreOptions) {
    this.options = options;
    this.client = new S3Client({
      endpoint: options.endpoint,
      region: options.region,
      forcePathStyle: options.forcePathStyle,
      credentials:
        options.accessKeyId && options.secretAccessKey
          ? { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey }
          : undefined,
      // Plain PUTs with a known length: S3-compatible servers do not all speak aws-chunked
      // checksums, and the platform checks its own sha256 anyway.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
  }
  private key(key: string): string {
    return `${this.options.prefix ?? ""}${safeKey(key)}`;
  }
  async putFile(key: string, path: string): Promise<void> {
    const { size } = await stat(path);
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.options.bucket,
        Key: this.key(key),
        Body: createReadStream(path),
        ContentLength: size,
        ContentType: "application/octet-stream",
      }),
    );
    await rm(path, { force: true });
  }
  async get(key: string): Promise<Readable> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.options.bucket, Key: this.key(key) }),
      );
      if (!(out.Body instanceof Readable)) throw new Error("S3 answered without a body stream");
      return out.Body;
    } catch (error) {
      if (error instanceof NoSuchKey) throw new BackupMissingError(key);
      throw error;
    }
  }
  async delete(key: string): Promise<void> {
    await this.client.send(
      new DeleteObjectCommand({ Bucket: this.options.bucket, Key: this.key(key) }),
    );
  }
  async deletePrefix(prefix: string): Promise<void> {
    for (;;) {
      const listed = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.options.bucket, Prefix: this.key(prefix) }),
      );
      const keys = (listed.Contents ?? []).flatMap((o) => (o.Key ? [o.Key] : []));
      // One by one: DeleteObjects needs a Content-MD5 that not every S3-compatible server checks.
      for (const Key of keys) {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.options.bucket, Key }));
      }
      if (!listed.IsTruncated || keys.length === 0) return;
    }
  }
}

let cached: { source: string; store: BackupStore } | undefined;

/** The configured store (BACKUP_STORE: local, the default, or s3). */
export function backupStore(): BackupStore {
  const e = env();
  const source = JSON.stringify([e.BACKUP_STORE, e.DATA_DIR, e.BACKUP_DIR, e.BACKUP_S3_ENDPOINT]);
  if (cached?.source === source) return cached.store;
  const store: BackupStore =
    e.BACKUP_STORE === "s3"
      ? new S3BackupStore({
          endpoint: e.BACKUP_S3_ENDPOINT,
          region: e.BACKUP_S3_REGION,
          bucket: e.BACKUP_S3_BUCKET as string,
          accessKeyId: e.BACKUP_S3_ACCESS_KEY_ID,
          secretAccessKey: e.BACKUP_S3_SECRET_ACCESS_KEY,
          forcePathStyle: e.BACKUP_S3_FORCE_PATH_STYLE,
          prefix: e.BACKUP_S3_PREFIX,
        })
      : new LocalBackupStore(e.BACKUP_DIR ?? join(e.DATA_DIR, "backups"));
  cached = { source, store };
  return store;
}

/** Hex sha256 and length of a stream. */
export async function digest(
  source: AsyncIterable<Buffer>,
): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash("sha256");
  let bytes = 0;
  for await (const chunk of source) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: hash.digest("hex"), bytes };
}

/**
 * The object's bytes once they are known to match `sha256` (a hashing pass first, then a fresh
 * read): nothing of a corrupted object reaches a restore or a download.
 */
export async function readVerified(
  store: BackupStore,
  key: string,
  sha256: string,
): Promise<Readable> {
  const { sha256: actual } = await digest(await store.get(key));
  if (actual !== sha256) throw new BackupChecksumError();
  return store.get(key);
}
