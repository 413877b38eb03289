import { execFileSync } from "node:child_process";
import { StorageQuota } from "../../worker/runtime/storage-quota.ts";
import { dockerRequired } from "./docker-support.ts";

// The btrfs storage root the storage-limit tests make their gateways' volumes on (decision
// 0216): STORAGE_TEST_ROOT (.ci/run prepares it with deploy/host-storage.sh), else one prepared
// here the same way, a sparse file outside the checkout kept mounted for later runs. Without
// root or btrfs-progs the tests are skipped with the reason (a failure under CI).

const DEFAULT_ROOT = "/var/tmp/agent-platform-test-storage";

export async function testStorageRoot(): Promise<{ quota: StorageQuota } | { reason: string }> {
  let root = process.env.STORAGE_TEST_ROOT;
  if (!root) {
    try {
      execFileSync("deploy/host-storage.sh", ["4G", `${DEFAULT_ROOT}.img`, DEFAULT_ROOT], {
        stdio: "pipe",
      });
      root = DEFAULT_ROOT;
    } catch (error) {
      const reason = `no storage root: ${String((error as { stderr?: Buffer }).stderr ?? error).trim()}`;
      if (dockerRequired) throw new Error(reason);
      return { reason };
    }
  }
  return StorageQuota.probe(root);
}
