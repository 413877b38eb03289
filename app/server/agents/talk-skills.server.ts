import type { GatewayClient } from "../openclaw/client.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { withGateway } from "./instance-gateway.server.ts";
import { type Target, targetOf } from "./talk-sessions.server.ts";

// The skills of a user's agent as its gateway reports them (GET /api/agent?action=skills, the
// skills tab), and turning one on or off. docs/decisions/0080-agent-interaction.md

/** How long a skill toggle waits for the gateway's reload to show it. */
const SKILL_SETTLE_MS = 15_000;

interface GatewaySkill {
  skillKey: string;
  name?: string;
  description?: string;
  emoji?: string;
  disabled?: boolean;
  eligible?: boolean;
  bundled?: boolean;
}

export async function gatewaySkills(
  client: GatewayClient,
  target: Target,
): Promise<GatewaySkill[]> {
  const result = await client.request<{ skills?: GatewaySkill[] }>("skills.status", {
    agentId: target.gatewayAgentId,
  });
  return result.skills ?? [];
}

function skillView(s: GatewaySkill) {
  return {
    id: s.skillKey,
    name: s.name ?? s.skillKey,
    description: s.description ?? "",
    emoji: s.emoji ?? null,
    enabled: !s.disabled,
    // Eligible: its requirements (binaries, OS, config) are met inside the instance.
    eligible: s.eligible ?? false,
  };
}

export async function listSkills(userId: string, agentId?: string) {
  const target = await targetOf(userId, agentId);
  return withGateway(userId, async (client) => ({
    skills: (await gatewaySkills(client, target)).map(skillView),
  }));
}

/** Turns a skill on or off in the gateway; 404 for a skill the instance does not have. */
export async function updateSkill(
  userId: string,
  skillId: string,
  enabled: boolean,
  agentId?: string,
) {
  const target = await targetOf(userId, agentId);
  return withGateway(userId, async (client) => {
    const skills = await gatewaySkills(client, target);
    if (!skills.some((s) => s.skillKey === skillId)) {
      throw new DomainError(404, "Skill not found");
    }
    await client.request("skills.update", { skillKey: skillId, enabled });
    // The gateway writes its config file and reloads; wait until its skill list shows the
    // change, so a read right after this answer is consistent.
    const deadline = Date.now() + SKILL_SETTLE_MS;
    for (let delay = 50; Date.now() < deadline; delay = Math.min(delay * 2, 500)) {
      const now = (await gatewaySkills(client, target)).find((s) => s.skillKey === skillId);
      if (now && !now.disabled === enabled) break;
      await new Promise((r) => setTimeout(r, delay));
    }
    return { success: true, skillId, enabled };
  });
}
