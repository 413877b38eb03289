import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
export const repoDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * The platform image of this checkout (deploy/build-image.sh: built, or reused when its inputs
 * are unchanged; one build at a time, the script locks its staging folder). Returns its tag.
 */
export async function buildPlatformImage(): Promise<string> {
  const { stdout } = await run(path.join(repoDir, "deploy/build-image.sh"), [], {
    cwd: repoDir,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((error: { stderr?: string }) => {
    throw new Error(`deploy/build-image.sh failed:\n${error.stderr ?? error}`);
  });
  const tag = stdout.trim().split("\n").at(-1) ?? "";
  if (!tag) throw new Error("deploy/build-image.sh printed no image tag");
  return tag;
}
