import { z } from "zod";
import type { ChatBody } from "./providers/shared.server.ts";

// Which agent a gateway's model call is for (decision 0225). A gateway calls with its instance
// token only, and runs all of its owner's agents; the platform writes each agent's id into that
// agent's entry of the gateway config (`params.extra_body`, which OpenClaw merges into every
// OpenAI-compatible request body of the agent: chat, channel messages, heartbeats), and the
// agents' endpoint takes it out of the body here. The id is only a hint: the metering flush
// keeps it when the agent belongs to the token's owner (metering.server.ts), so naming another
// tenant's agent attributes nothing.

/** The body field the gateway config makes OpenClaw send. */
export const AGENT_HINT_FIELD = "platform_agent";

const agentId = z.string().regex(/^agt_[A-Za-z0-9_-]{1,64}$/);

/** The body without the hint (it never reaches a provider), and the hint when well formed. */
export function takeAgentHint(body: ChatBody): { body: ChatBody; agentHint: string | null } {
  if (!(AGENT_HINT_FIELD in body)) return { body, agentHint: null };
  const { [AGENT_HINT_FIELD]: hint, ...rest } = body;
  const parsed = agentId.safeParse(hint);
  return { body: rest, agentHint: parsed.success ? parsed.data : null };
}
