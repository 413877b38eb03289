import { existsSync } from "node:fs";

// `.ci/run` builds the gateway images while the test files that need no gateway run, and names
// the files that gateway/build.sh's exit status is written to when each build ends (decision
// 0098): GATEWAY_BUILD_STATUS for the current OpenClaw, GATEWAY_OLD_BUILD_STATUS for the older
// one the update tests start from (decision 0161). Without the variable there is no build to
// wait for.

type StatusVariable = "GATEWAY_BUILD_STATUS" | "GATEWAY_OLD_BUILD_STATUS";

/** True while a gateway image build that `.ci/run` started is still running. */
export function gatewayBuildPending(variable: StatusVariable = "GATEWAY_BUILD_STATUS"): boolean {
  const status = process.env[variable];
  return Boolean(status) && !existsSync(status as string);
}

/** Waits until that build has ended (at once when there is none). */
export async function gatewayBuildFinished(
  timeoutMs = 30 * 60_000,
  variable: StatusVariable = "GATEWAY_BUILD_STATUS",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (gatewayBuildPending(variable)) {
    if (Date.now() > deadline) throw new Error("the gateway image build did not finish");
    await new Promise((r) => setTimeout(r, 1_000));
  }
}
