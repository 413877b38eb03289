import {
  blockedReason,
  gatewayVersionPolicy,
} from "../../app/server/agents/gateway-versions.server.ts";

// The worker's side of the version policy (decision 0161): the image new gateways are created
// from and updates move to, and the refusal of a blocked OpenClaw version.

/** The pinned image tag (the operator's, else AGENT_GATEWAY_IMAGE). */
export async function pinnedGatewayImage(): Promise<string> {
  return (await gatewayVersionPolicy()).pinnedImage;
}

/** Throws when no gateway may be created on or updated to `tag`. */
export async function refuseBlockedImage(tag: string): Promise<void> {
  const why = blockedReason(await gatewayVersionPolicy(), tag);
  if (why) throw new Error(why);
}
