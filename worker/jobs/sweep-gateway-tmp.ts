import { sweepAllGatewayTmp } from "../instances/tmp-sweep.ts";

/** Periodic: OpenClaw's stale temporary folders removed from running gateways (decision 0224). */
export async function sweepGatewayTmpJob() {
  return { removed: await sweepAllGatewayTmp() };
}
