import { existsSync } from "node:fs";

// `.ci/run` builds the gateway image while the test files that need no gateway run, and names
// the file that gateway/build.sh's exit status is written to (GATEWAY_BUILD_STATUS) when it
// ends (decision 0098). Without that variable there is no build to wait for.

/** True while a gateway image build that `.ci/run` started is still running. */
export function gatewayBuildPending(): boolean {
  const status = process.env.GATEWAY_BUILD_STATUS;
  return Boolean(status) && !existsSync(status as string);
}

/** Waits until that build has ended (at once when there is none). */
export async function gatewayBuildFinished(timeoutMs = 30 * 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (gatewayBuildPending()) {
    if (Date.now() > deadline) throw new Error("the gateway image build did not finish");
    await new Promise((r) => setTimeout(r, 1_000));
  }
}
