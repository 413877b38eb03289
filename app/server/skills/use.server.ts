import { getOwnedAgent } from "../agents/agents.server.ts";
import { withGateway } from "../agents/instance-gateway.server.ts";
import { chat, type TurnEvents } from "../agents/talk.server.ts";
import { targetOf } from "../agents/talk-sessions.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { missingOf, skillsStatus } from "./gateway-skills.server.ts";

// Using a skill (POST /api/skills/:name): one chat turn of the caller's agent whose message
// names the skill and its SKILL.md the way OpenClaw's own explicit skill references do ("Use the
// following explicitly referenced skills … Read each skill's SKILL.md before acting"). The
// gateway's `/<command>` expansion is not applied to control-protocol chat.send turns (measured:
// the model got the raw text), so the platform writes the same instruction itself. It is an
// ordinary agent turn: the active session (or the one named), recorded, and metered by the
// platform's AI endpoint like any other.
// docs/decisions/0110-skills-api.md

export interface UseInput {
  input: string;
  agentId?: string | undefined;
  sessionId?: string | undefined;
}

/**
 * Checks that `name` can run on the agent: installed through the marketplace (or bundled with
 * the gateway), present and eligible there. 404 unknown or not installed, 400 missing
 * requirements, 502 gateway down. Returns the agent and the installed version.
 */
export async function prepareSkillUse(userId: string, name: string, agentId?: string) {
  const target = agentId ? { agent: await getOwnedAgent(userId, agentId) } : await targetOf(userId);
  const agent = target.agent;
  if (!agent) throw new DomainError(404, "No agent: create an agent first");
  const [installed] = await db()<{ version: string }[]>`
    select v.version from skill_installs i join skills s on s.id = i.skill_id
    join skill_versions v on v.id = i.version_id
    where i.agent_id = ${agent.id} and s.name = ${name}`;
  const status = await withGateway(userId, (client) =>
    skillsStatus(client, agent.gateway_agent_id),
  );
  const skill = status.skills.find((s) => (s.name ?? s.skillKey) === name);
  const bundled = skill && (skill.bundled || skill.source === "openclaw-bundled");
  if (!skill || (!installed && !bundled)) {
    throw new DomainError(404, `Skill ${name} is not installed on this agent`);
  }
  const missing = missingOf(skill);
  if (missing.length > 0) {
    throw new DomainError(
      400,
      `${name} needs what this agent does not have: ${missing.join(", ")}`,
      {
        missing,
      },
    );
  }
  if (skill.disabled) throw new DomainError(400, `${name} is disabled on this agent`);
  return { agent, version: installed?.version ?? null, skillFile: skill.filePath ?? null };
}

/** Runs the skill; `events.onDelta` receives the reply as it streams. */
export async function runSkill(
  userId: string,
  name: string,
  input: UseInput,
  prepared: Awaited<ReturnType<typeof prepareSkillUse>>,
  events: TurnEvents = {},
) {
  const message = [
    "Use the following explicitly referenced skill for this request. Read its SKILL.md before acting:",
    prepared.skillFile ? `- ${name} (SKILL.md: ${prepared.skillFile})` : `- ${name}`,
    "",
    "User request:",
    input.input,
  ].join("\n");
  const result = await chat(
    userId,
    {
      message,
      agentId: prepared.agent.id,
      ...(input.sessionId ? { sessionId: input.sessionId } : {}),
    },
    events,
  );
  return {
    skill: name,
    version: prepared.version,
    agentId: prepared.agent.id,
    sessionId: result.sessionId,
    reply: result.reply,
    timestamp: result.timestamp,
  };
}
