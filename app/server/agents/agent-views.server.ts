import { getAgentVerification } from "../identity/verification.server.ts";
import { env } from "../platform/env.server.ts";
import { versionedRead } from "../platform/read-cache.server.ts";
import { agentAddress } from "./agent-address.server.ts";
import {
  type AgentSummaryRow,
  getOwnedAgent,
  instanceStatusOf,
  listAgentSummaryRows,
} from "./agents.server.ts";
import { agentStatus, getInstanceByUser, type StatusFields } from "./instances.server.ts";
import { progressView, readProgress } from "./progress.server.ts";
import { provisionQueuePlace } from "./provision-queue.server.ts";
import { storageOfUser } from "./storage.server.ts";
import { wakeQueuePlace } from "./wake-queue.server.ts";

// The contract's views of agents: summaries (lists, provisioning results) and the detail of
// GET /api/agents/:id. docs/decisions/0060-agents.md

// The origin part, parsed once per APP_URL: a list of 20 agents parsed the URL 20 times per
// request (docs/decisions/0150).
let socketBase: { appUrl: string; prefix: string } | undefined;

/** ws://<host>/agent/<user_id> on the application's origin (wss behind https). */
export function websocketUrl(userId: string): string {
  const appUrl = env().APP_URL;
  if (socketBase?.appUrl !== appUrl) {
    const app = new URL(appUrl);
    const scheme = app.protocol === "https:" ? "wss" : "ws";
    socketBase = { appUrl, prefix: `${scheme}://${app.host}/agent/` };
  }
  return socketBase.prefix + encodeURIComponent(userId);
}

/** Agent summary (list items and provisioning results). */
export function agentSummary(row: AgentSummaryRow, instance: StatusFields | undefined) {
  return {
    id: row.id,
    name: row.name,
    model: row.model,
    status: agentStatus(instance),
    websocketUrl: websocketUrl(row.user_id),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function agentSummaries(userId: string) {
  // Kept while nothing behind the list changed (read-cache). The summaries' socket URLs follow
  // APP_URL: part of the key.
  return versionedRead(userId, `agents:${env().APP_URL}`, async () => {
    const rows = await listAgentSummaryRows(userId);
    return rows.map((row) => agentSummary(row, instanceStatusOf(row)));
  });
}

export async function listAgentsView(userId: string) {
  const agents = await agentSummaries(userId);
  return { agents, count: agents.length, status: "ok" };
}

/**
 * Where a sleeping instance's wake waits. Read outside the kept detail: other owners' wakes move
 * it. Only a sleeping instance can be queued, so the others cost no query.
 */
export async function wakeQueueView(instance: { id: string; observed_state: string } | undefined) {
  if (instance?.observed_state !== "sleeping") return null;
  const place = await wakeQueuePlace(instance.id);
  return place && { ahead: place.ahead, requestedAt: place.requestedAt.toISOString() };
}

/** States in which an instance's provision can wait in line (error: its job's retry waits). */
const UNSTARTED = new Set(["new", "provisioning", "error"]);

/**
 * Where a provision waits for room to start its gateway (decision 0231). Only an instance with
 * no container yet, not running, can be in that line, so the others cost no query.
 */
export async function provisionQueueView(
  instance: { id: string; container_id: string | null; observed_state: string } | undefined,
) {
  if (!instance || instance.container_id || !UNSTARTED.has(instance.observed_state)) return null;
  const place = await provisionQueuePlace(instance.id);
  return place && { ahead: place.ahead, requestedAt: place.requestedAt.toISOString() };
}

/** The contract's Agent detail: the instance's live facts plus the verification record. */
export async function agentDetail(userId: string, agentId: string) {
  // Kept while nothing behind it changed (read-cache); a non-owned id still answers 404.
  const [{ agent, instance, verification, recorded }, storage] = await Promise.all([
    versionedRead(userId, `agent:${agentId}`, async () => {
      // One round trip: the reads go out together.
      const [agent, instance, verification] = await Promise.all([
        getOwnedAgent(userId, agentId),
        getInstanceByUser(userId),
        getAgentVerification(agentId),
      ]);
      return { agent, instance, verification, recorded: await readProgress(instance) };
    }),
    // Usage changes without bumping the kept view's version: read apart, alongside it.
    storageOfUser(userId),
  ]);
  const [progress, wakeQueue, provisionQueue] = await Promise.all([
    progressView(instance, recorded),
    wakeQueueView(instance),
    provisionQueueView(instance),
  ]);
  const { subdomain, url } = agentAddress(agent.id);
  return {
    agent: {
      id: agent.id,
      name: agent.name,
      model: agent.model,
      status: agentStatus(instance),
      startedAt: instance?.started_at?.toISOString() ?? null,
      plan: instance?.plan ?? agent.tier,
      subdomain,
      url,
      // As the running gateway reported it in hello-ok (recorded by the worker).
      gatewayVersion: instance?.gateway_version ?? "unknown",
      verified: verification.verified,
      verificationType: verification.verificationType,
      attestationUid: verification.attestationUid,
      verifiedAt: verification.verifiedAt,
      // What the worker is at while it brings the gateway up (decision 0137).
      step: progress.step,
      progress: progress.steps,
      // Which start-up that is, since when, and how long such a one usually takes (0158).
      progressAction: progress.action,
      progressStartedAt: progress.startedAt,
      estimate: progress.estimate,
      // Used / limit as the kernel measures it, and "full" at the wall (decision 0216).
      storage,
      // A wake waiting its turn (decision 0221): "waking, 2 ahead of you"; null otherwise.
      wakeQueue,
      // A provision waiting for room on the host (decision 0231): "starting, 2 ahead of you".
      provisionQueue,
    },
    status: "ok",
  };
}
