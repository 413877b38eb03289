import { randomBytes } from "node:crypto";
import {
  createWriteStream,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BackupChecksumError,
  BackupMissingError,
  type BackupStore,
  digest,
  LocalBackupStore,
  readVerified,
  S3BackupStore,
} from "../../app/server/platform/backup-store.server.ts";
import { openStream, sealStream } from "../../app/server/platform/sealed-stream.server.ts";
import { type S3Server, startS3Server } from "../helpers/s3-server.ts";

// The backup store's two drivers against the same checks: a local folder and a real
// S3-compatible server (s3rver, in-process on loopback).

const work = mkdtempSync(join(tmpdir(), "backup-store-"));
const plaintext = Buffer.concat([
  Buffer.from("MEMORY.md: the user likes tea\n"),
  randomBytes(300_000),
]);

async function sealToFile(name: string): Promise<{ path: string; sha256: string }> {
  const path = join(work, name);
  await pipeline(Readable.from(sealStream(Readable.from([plaintext]))), createWriteStream(path));
  const { sha256 } = await digest(Readable.from([readFileSync(path)]));
  return { path, sha256 };
}

async function collect(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of source) chunks.push(chunk);
  return Buffer.concat(chunks);
}

let s3: S3Server;

beforeAll(async () => {
  s3 = await startS3Server();
});

afterAll(async () => {
  await s3.close();
  rmSync(work, { recursive: true, force: true });
});

/** Every file under a folder, concatenated (what the driver left at rest). */
function bytesAtRest(dir: string): Buffer {
  const out: Buffer[] = [];
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) out.push(readFileSync(join(entry.parentPath, entry.name)));
  }
  return Buffer.concat(out);
}

const drivers: Array<[string, () => { store: BackupStore; restDir: string }]> = [
  [
    "local folder",
    () => {
      const root = join(work, "local");
      return { store: new LocalBackupStore(root), restDir: root };
    },
  ],
  [
    "S3 (s3rver)",
    () => ({
      store: new S3BackupStore({
        endpoint: `http://127.0.0.1:${s3.port}`,
        region: "us-east-1",
        bucket: "backups",
        accessKeyId: "S3RVER",
        secretAccessKey: "S3RVER",
        forcePathStyle: true,
        prefix: "platform/",
      }),
      restDir: s3.dir,
    }),
  ],
];

describe.each(drivers)("backup store: %s", (_name, make) => {
  it("round-trips an encrypted object whose bytes at rest are not the plaintext", async () => {
    const { store, restDir } = make();
    const { path, sha256 } = await sealToFile(`rt-${store.driver}`);
    await store.putFile("usr_a/agt_a/bkp_1.bin", path);
    const back = await collect(
      openStream(await readVerified(store, "usr_a/agt_a/bkp_1.bin", sha256)),
    );
    expect(back.equals(plaintext)).toBe(true);
    const atRest = bytesAtRest(restDir);
    expect(atRest.length).toBeGreaterThan(plaintext.length);
    expect(atRest.includes(Buffer.from("the user likes tea"))).toBe(false);
    expect(atRest.includes(plaintext.subarray(100_000, 100_064))).toBe(false);
  });

  it("refuses an object that does not match its checksum, and a missing one", async () => {
    const { store } = make();
    const { path, sha256 } = await sealToFile(`cs-${store.driver}`);
    const raw = readFileSync(path);
    raw[raw.length - 100] = (raw[raw.length - 100] as number) ^ 0xff;
    writeFileSync(path, raw);
    await store.putFile("usr_a/agt_a/bkp_2.bin", path);
    await expect(readVerified(store, "usr_a/agt_a/bkp_2.bin", sha256)).rejects.toBeInstanceOf(
      BackupChecksumError,
    );
    // Without the checksum the cipher's tag still refuses the altered bytes.
    await expect(collect(openStream(await store.get("usr_a/agt_a/bkp_2.bin")))).rejects.toThrow(
      /authentication/,
    );
    await store.delete("usr_a/agt_a/bkp_2.bin");
    await expect(store.get("usr_a/agt_a/bkp_2.bin")).rejects.toBeInstanceOf(BackupMissingError);
  });

  it("removes everything under a prefix (an erased account) and nothing else", async () => {
    const { store } = make();
    for (const key of ["usr_gone/agt_1/b1.bin", "usr_gone/agt_2/b2.bin", "usr_kept/agt_3/b3.bin"]) {
      await store.putFile(
        key,
        (await sealToFile(`p-${store.driver}-${key.replace(/\//g, "_")}`)).path,
      );
    }
    await store.deletePrefix("usr_gone/");
    await expect(store.get("usr_gone/agt_1/b1.bin")).rejects.toBeInstanceOf(BackupMissingError);
    await expect(store.get("usr_gone/agt_2/b2.bin")).rejects.toBeInstanceOf(BackupMissingError);
    expect(
      (await collect(openStream(await store.get("usr_kept/agt_3/b3.bin")))).equals(plaintext),
    ).toBe(true);
  });
});

describe("sealed stream", () => {
  it("refuses a truncated stream and a foreign header", async () => {
    const sealed = await collect(sealStream(Readable.from([plaintext])));
    await expect(collect(openStream(Readable.from([sealed.subarray(0, 40)])))).rejects.toThrow(
      /truncated/,
    );
    await expect(
      collect(openStream(Readable.from([sealed.subarray(0, sealed.length - 20)]))),
    ).rejects.toThrow(/authentication/);
    await expect(
      collect(openStream(Readable.from([Buffer.from("PK\x03\x04 zip")]))),
    ).rejects.toThrow(/unknown header/);
  });
});
