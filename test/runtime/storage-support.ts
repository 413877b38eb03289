import { execFileSync } from "node:child_process";
import { StorageQuota } from "../../worker/runtime/storage-quota.ts";
import { dockerRequired } from "./docker-support.ts";

// The btrfs storage root the storage-limit tests make their gateways' volumes on (decision
// 0216): STORAGE_TEST_ROOT (.ci/run prepares it with deploy/host-storage.sh), else one prepared
// here the same way, a sparse file outside the checkout kept mounted for later runs. Without
// root or btrfs-progs the tests are skipped with the reason (a failure under CI).

const DEFAULT_ROOT = "/var/tmp/agent-platform-test-storage";

type Probed = { quota: StorageQuota } | { reason: string };

export async function testStorageRoot(): Promise<Probed> {
  const root = process.env.STORAGE_TEST_ROOT;
  return root ? StorageQuota.probe(root) : preparedRoot(DEFAULT_ROOT, "4G");
}

/**
 * A btrfs root of the test's own, beside the shared one, for a test that puts the whole
 * filesystem in a state the others must not see (inconsistent counts).
 */
export function ownStorageRoot(name: string): Promise<Probed> {
  return preparedRoot(`${DEFAULT_ROOT}-${name}`, "1G");
}

async function preparedRoot(root: string, size: string): Promise<Probed> {
  try {
    execFileSync("deploy/host-storage.sh", [size, `${root}.img`, root], { stdio: "pipe" });
  } catch (error) {
    const reason = `no storage root: ${String((error as { stderr?: Buffer }).stderr ?? error).trim()}`;
    if (dockerRequired) throw new Error(reason);
    return { reason };
  }
  return StorageQuota.probe(root);
}
