import { z } from "zod";
import { type AgentRow, getOwnedAgent } from "../agents/agents.server.ts";
import { withGateway } from "../agents/instance-gateway.server.ts";
import { awaitJob, type InstanceRow } from "../agents/instances.server.ts";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import {
  type GatewaySkillStatus,
  installArchive,
  missingOf,
  setSkillEnabled,
  waitForSkill,
} from "./gateway-skills.server.ts";
import { syncShippedSkills } from "./shipped.server.ts";
import { compareVersions } from "./skill-package.server.ts";

// Install, update and remove a catalog skill on one of the caller's agents. The folder goes
// into the agent's workspace `skills/<name>` on the instance's state volume through the gateway
// (skills.upload.* + skills.install), so it survives restart, repair and image updates; the
// gateway then reports it in skills.status and the platform enables it. Removal deletes the
// folder through the worker (the protocol has no delete). docs/decisions/0110-skills-api.md

/** How long removal waits for the worker. */
const REMOVE_WAIT_MS = 60_000;

interface InstallableVersion {
  skill_id: string;
  name: string;
  version_id: string;
  version: string;
  archive: Buffer;
}

/** The versions of `name` the user may install, newest first (the catalog's visibility rules). */
async function installableVersions(userId: string, name: string): Promise<InstallableVersion[]> {
  await syncShippedSkills();
  return db()<InstallableVersion[]>`
    select s.id as skill_id, s.name, v.id as version_id, v.version, v.archive
    from skills s join skill_versions v on v.skill_id = s.id
    where s.name = ${name} and v.unlisted_at is null
      and (s.source = 'platform' or s.publisher_id = ${userId}
        or (s.visibility = 'public' and v.approved_at is not null))
    order by v.major desc, v.minor desc, v.patch desc`;
}

async function pickVersion(userId: string, name: string, version?: string) {
  const versions = await installableVersions(userId, name);
  if (versions.length === 0) throw new DomainError(404, "Skill not found");
  const chosen = version ? versions.find((v) => v.version === version) : versions[0];
  if (!chosen) throw new DomainError(404, `Version ${version} of ${name} not found`);
  return chosen;
}

async function installRow(agentId: string, skillId: string) {
  const [row] = await db()<{ version: string; version_id: string }[]>`
    select v.version, i.version_id from skill_installs i
    join skill_versions v on v.id = i.version_id
    where i.agent_id = ${agentId} and i.skill_id = ${skillId}`;
  return row;
}

async function skillIdOf(name: string): Promise<string> {
  const [row] = await db()<{ id: string }[]>`select id from skills where name = ${name}`;
  if (!row) throw new DomainError(404, "Skill not found");
  return row.id;
}

const removeOutcome = z.discriminatedUnion("ok", [
  z.object({ ok: z.literal(true) }),
  z.object({ ok: z.literal(false), failure: z.string(), message: z.string() }),
]);

/** Deletes the folder through the worker and waits until the gateway no longer lists it. */
async function deleteFolder(
  client: GatewayClient,
  instance: InstanceRow,
  agent: AgentRow,
  skill: GatewaySkillStatus | undefined,
  name: string,
  workspaceDir: string | undefined,
): Promise<void> {
  const dir = skill?.baseDir ?? (workspaceDir ? `${workspaceDir}/skills/${name}` : undefined);
  if (!dir) return;
  const jobId = await sendJob("remove-skill-folder", { instanceId: instance.id, dir, name });
  const done = await awaitJob("remove-skill-folder", jobId, REMOVE_WAIT_MS);
  const outcome = removeOutcome.safeParse(done?.output);
  if (!done || !outcome.success || !outcome.data.ok) {
    throw new DomainError(502, "The agent's instance did not remove the skill folder");
  }
  await waitForSkill(
    client,
    agent.gateway_agent_id,
    name,
    (s) => s === undefined || s.source === "openclaw-bundled",
  );
}

/** A workspace copy of the skill in the agent's status (not a bundled one of the same name). */
const isWorkspaceCopy = (s: GatewaySkillStatus | undefined) =>
  s !== undefined && !s.bundled && s.source !== "openclaw-bundled";

async function writeAndEnable(
  userId: string,
  agent: AgentRow,
  chosen: InstallableVersion,
  replace: boolean,
) {
  return withGateway(userId, async (client, instance) => {
    await installArchive(client, {
      gatewayAgentId: agent.gateway_agent_id,
      slug: chosen.name,
      archive: chosen.archive,
      force: replace,
    });
    const { skill, workspaceDir } = await waitForSkill(
      client,
      agent.gateway_agent_id,
      chosen.name,
      isWorkspaceCopy,
    );
    const missing = skill ? missingOf(skill) : [];
    if (missing.length > 0) {
      // The agent cannot run it: take it out again and say what is missing.
      await deleteFolder(client, instance, agent, skill, chosen.name, workspaceDir);
      throw new DomainError(
        400,
        `${chosen.name} needs what this agent does not have: ${missing.join(", ")}`,
        {
          missing,
        },
      );
    }
    if (skill?.disabled) {
      await setSkillEnabled(client, skill.skillKey, true);
      await waitForSkill(client, agent.gateway_agent_id, chosen.name, (s) => s?.disabled === false);
    }
  });
}

export async function installSkill(
  userId: string,
  input: { name: string; agentId: string; version?: string | undefined },
) {
  const agent = await getOwnedAgent(userId, input.agentId);
  const chosen = await pickVersion(userId, input.name, input.version);
  if (await installRow(agent.id, chosen.skill_id)) {
    throw new DomainError(409, `${chosen.name} is already installed on this agent; use update`);
  }
  await writeAndEnable(userId, agent, chosen, true);
  await db()`
    insert into skill_installs (agent_id, skill_id, version_id, user_id, enabled)
    values (${agent.id}, ${chosen.skill_id}, ${chosen.version_id}, ${userId}, true)
    on conflict (agent_id, skill_id) do update set version_id = excluded.version_id,
      enabled = true, updated_at = now()`;
  return {
    name: chosen.name,
    agentId: agent.id,
    version: chosen.version,
    installed: true,
    enabled: true,
  };
}

/** Moves an installed skill to the newest version it may have (or `version`). */
export async function updateSkillVersion(
  userId: string,
  input: { name: string; agentId: string; version?: string | undefined },
) {
  const agent = await getOwnedAgent(userId, input.agentId);
  const current = await installRow(agent.id, await skillIdOf(input.name));
  if (!current) throw new DomainError(404, `${input.name} is not installed on this agent`);
  const chosen = await pickVersion(userId, input.name, input.version);
  if (compareVersions(chosen.version, current.version) <= 0 && !input.version) {
    return { name: chosen.name, agentId: agent.id, version: current.version, updated: false };
  }
  await writeAndEnable(userId, agent, chosen, true);
  await db()`update skill_installs set version_id = ${chosen.version_id}, enabled = true,
    updated_at = now() where agent_id = ${agent.id} and skill_id = ${chosen.skill_id}`;
  return {
    name: chosen.name,
    agentId: agent.id,
    version: chosen.version,
    previousVersion: current.version,
    updated: true,
  };
}

/** Uninstalls: the folder is deleted from the agent's workspace. */
export async function removeSkill(userId: string, input: { name: string; agentId: string }) {
  const agent = await getOwnedAgent(userId, input.agentId);
  const skillId = await skillIdOf(input.name);
  if (!(await installRow(agent.id, skillId))) {
    throw new DomainError(404, `${input.name} is not installed on this agent`);
  }
  await withGateway(userId, async (client, instance) => {
    const { skill, workspaceDir } = await waitForSkill(
      client,
      agent.gateway_agent_id,
      input.name,
      () => true,
    );
    await deleteFolder(
      client,
      instance,
      agent,
      isWorkspaceCopy(skill) ? skill : undefined,
      input.name,
      workspaceDir,
    );
  });
  await db()`delete from skill_installs where agent_id = ${agent.id} and skill_id = ${skillId}`;
  return { name: input.name, agentId: agent.id, removed: true };
}

/** The caller's installed marketplace skills on one agent (the agent page). */
export async function installedOnAgent(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const rows = await db()<
    { name: string; version: string; enabled: boolean; newest: string | null }[]
  >`
    select s.name, v.version, i.enabled,
      (select v2.version from skill_versions v2 where v2.skill_id = s.id and v2.unlisted_at is null
         and (s.source = 'platform' or s.publisher_id = ${userId} or v2.approved_at is not null)
       order by v2.major desc, v2.minor desc, v2.patch desc limit 1) as newest
    from skill_installs i join skills s on s.id = i.skill_id
    join skill_versions v on v.id = i.version_id
    where i.agent_id = ${agent.id} order by s.name`;
  return rows.map((r) => ({
    name: r.name,
    version: r.version,
    enabled: r.enabled,
    updateAvailable:
      r.newest !== null && compareVersions(r.newest, r.version) > 0 ? r.newest : null,
  }));
}
