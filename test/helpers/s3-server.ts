import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";

/** A real S3-compatible server (s3rver) on loopback with a `backups` bucket, in a temp folder. */
export interface S3Server {
  port: number;
  /** Where it keeps the objects (what is at rest). */
  dir: string;
  close(): Promise<void>;
}

export async function startS3Server(): Promise<S3Server> {
  const dir = mkdtempSync(join(tmpdir(), "s3rver-"));
  const server = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory: dir,
    configureBuckets: [{ name: "backups", configs: [] }],
  });
  const { port } = await server.run();
  return {
    port,
    dir,
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
