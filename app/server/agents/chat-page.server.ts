import { z } from "zod";
import { DomainError } from "../platform/errors.server.ts";
import { liveStreamOf } from "./channel-provisioning.server.ts";
import { CREDENTIAL_KEYS } from "./channels.server.ts";
import { agentStatus, getInstanceByUser } from "./instances.server.ts";
import { instanceProgress, STARTING_STATUSES } from "./progress.server.ts";
import { activeSessionId, getSession, listSessions, memory } from "./talk-sessions.server.ts";
import { listSkills } from "./talk-skills.server.ts";
import { credentials } from "./talk-status.server.ts";
import { whatsappStatus } from "./whatsapp-link.server.ts";

// The data of an agent's tabs (issue 25: chat first): the chat (app/routes/agents.$id.chat.tsx),
// skills (agents.$id.skills.tsx) and channels (agents.$id.channels.tsx).

/** A gateway that is down must not take the whole page with it: show why instead. */
export async function attempt<T>(fn: () => Promise<T>): Promise<{ value?: T; error?: string }> {
  try {
    return { value: await fn() };
  } catch (error) {
    if (error instanceof DomainError) return { error: error.message };
    throw error;
  }
}

/** What the chat page shows of the user's agent (`selected`: the session in the URL). */
export async function chatPage(
  user: { id: string },
  agent: { id: string; name: string; model: string },
  selected: string | undefined,
) {
  // The status first: an error of the gateway calls below is shown only when it was not
  // starting then (read after them, a start that ended meanwhile showed its "not provisioned").
  const instance = await getInstanceByUser(user.id);
  const status = agentStatus(instance);
  const starting = STARTING_STATUSES.includes(status);
  const sessions = await attempt(() => listSessions(user.id, agent.id));
  const sessionId =
    selected ?? (await activeSessionId(user.id, agent.id)) ?? sessions.value?.sessions.at(0)?.id;
  const [conversation, mem] = await Promise.all([
    attempt(async () => (sessionId ? getSession(user.id, sessionId, agent.id) : undefined)),
    attempt(() => memory(user.id, agent.id)),
  ]);
  return {
    userId: user.id,
    agent: { id: agent.id, name: agent.name, model: agent.model },
    sessions: sessions.value?.sessions ?? [],
    // While it starts, "gateway unavailable" is expected: the page says it is starting instead.
    gatewayError: starting ? undefined : sessions.error,
    status,
    progress: starting ? await instanceProgress(instance) : null,
    sessionId: sessionId ?? null,
    messages: conversation.value?.messages ?? [],
    memory: mem.value?.memory ?? [],
  };
}

/**
 * The skills tab: by default only the skills that can work on this agent (eligible, or turned
 * on: an enabled skill stays visible so it can be turned off); `all` shows every one.
 */
export async function skillsPage(
  user: { id: string },
  agent: { id: string; name: string },
  all: boolean,
) {
  const listed = await attempt(() => listSkills(user.id, agent.id));
  const skills = listed.value?.skills ?? [];
  const usable = skills.filter((s) => s.eligible || s.enabled);
  return {
    agent: { id: agent.id, name: agent.name },
    skills: all ? skills : usable,
    hidden: all ? 0 : skills.length - usable.length,
    all,
    gatewayError: listed.error ?? null,
  };
}

/** The channels tab: credentials, the chat apps, WhatsApp's link state and the live stream. */
export async function channelsPage(user: { id: string }, agent: { id: string; name: string }) {
  const [creds, stream] = await Promise.all([credentials(user.id), liveStreamOf(user.id)]);
  // WhatsApp's link state, once chatapp3 is set up (the gateway is asked only then).
  const whatsapp = creds.credentials.chatapp3 ? await attempt(() => whatsappStatus(user.id)) : null;
  return {
    agent: { id: agent.id, name: agent.name },
    credentials: creds.credentials,
    stream: stream ?? null,
    whatsapp: whatsapp ? { status: whatsapp.value ?? null, error: whatsapp.error ?? null } : null,
  };
}

const token = z.string().trim().max(4096).optional();

/** The chat tab's forms, by `intent`. */
export const chatPageActions = z.discriminatedUnion("intent", [
  z.object({
    intent: z.literal("chat"),
    message: z.string({ error: "Write a message" }).trim().min(1, "Write a message"),
    sessionId: z.string().max(200).optional(),
  }),
  z.object({ intent: z.literal("new-session") }),
]);

/** The skills tab's forms: a gateway skill on or off; a marketplace skill updated or removed. */
export const skillsPageActions = z.discriminatedUnion("intent", [
  z.object({
    intent: z.literal("skill"),
    skillId: z.string().max(200),
    enabled: z.enum(["true", "false"]),
  }),
  z.object({ intent: z.enum(["skill-update", "skill-remove"]), name: z.string().min(1).max(100) }),
]);

/** The channels tab's forms, by `intent` (server-only: it names server constants). */
export const channelsPageActions = z.discriminatedUnion("intent", [
  z.object({
    intent: z.literal("credential"),
    key: z.enum(CREDENTIAL_KEYS, { error: "Choose a credential" }),
    value: z.string({ error: "Enter a value" }).trim().min(1, "Enter a value").max(4096),
  }),
  z.object({
    intent: z.literal("channels"),
    chatapp1Token: token,
    chatapp2BotToken: token,
    chatapp3Token: token,
  }),
  z.object({ intent: z.literal("whatsapp-link"), force: z.enum(["true", "false"]).optional() }),
  z.object({ intent: z.literal("whatsapp-wait"), currentQrDataUrl: z.string().optional() }),
]);
