import { z } from "zod";
import { chat } from "../agents/talk.server.ts";
import { complete } from "../ai/completions.server.ts";
import { quoteCompletion } from "../ai/quote.server.ts";
import { taskTypes } from "../ai/selection.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { prepareSkillUse, runSkill } from "../skills/use.server.ts";
import {
  type BuiltinPlugin,
  type GatewayPlugin,
  isSkillPlugin,
  type SkillPlugin,
} from "./plugin-prices.server.ts";

// The plugins the paid gateway routes to, each with the zod schema of its `input` and what it
// runs. A completion's tokens go through the AI layer like every other model call: paid by
// credits, they are held and metered to the caller's account; paid by x402, the price includes
// the most they can cost (the layer's hold for the call, quoted before it runs and with its
// model pinned), so the payment covers the worst case (decision 0199).
// A marketplace skill is the plugin `skill:<name>`: one turn of the caller's agent with that
// skill, exactly as POST /api/skills/:name runs it (decision 0174).
// docs/decisions/0128-paid-plugin-gateway.md

/** The most completion tokens a gateway call may ask for (the price must cover them). */
export const GATEWAY_MAX_TOKENS = 1024;
/** The completion limit of a call that sets none. */
export const GATEWAY_DEFAULT_MAX_TOKENS = 256;

const message = z.object({
  role: z.enum(["user", "assistant", "system"]),
  content: z.string().max(32_000),
});

export const pluginInputs = {
  "ai.completion": z
    .object({
      messages: z.array(message).min(1, "must not be empty").max(50),
      model: z.string().trim().min(1).max(200).optional(),
      taskType: z.enum(taskTypes).optional(),
      temperature: z.number().min(0).max(2).optional(),
      max_tokens: z.number().int().positive().max(GATEWAY_MAX_TOKENS).optional(),
    })
    .strict(),
  "agent.chat": z
    .object({
      message: z.string().trim().min(1).max(32_000),
      agentId: z.string().min(1).max(64).optional(),
      sessionId: z.string().min(1).max(300).optional(),
    })
    .strict(),
} satisfies Record<BuiltinPlugin, z.ZodType>;

/** A skill plugin's input: POST /api/skills/:name's body without streaming. */
const skillInput = z
  .object({
    input: z.string().trim().min(1, "is required").max(8_000),
    agentId: z.string().trim().min(1).max(100).optional(),
    sessionId: z.string().max(300).optional(),
  })
  .strict();

export type PluginInput<P extends BuiltinPlugin> = z.output<(typeof pluginInputs)[P]>;
type SkillInput = z.output<typeof skillInput>;

/** Parses a plugin's input: 400 `input.<field>: …` when it does not fit. */
export function parsePluginInput(plugin: GatewayPlugin, input: unknown) {
  const schema: z.ZodType = isSkillPlugin(plugin) ? skillInput : pluginInputs[plugin];
  const parsed = schema.safeParse(input ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = ["input", ...(issue?.path ?? [])].join(".");
    throw new DomainError(400, `${field}: ${issue?.message}`);
  }
  return parsed.data;
}

/** Whether the plugin acts on the caller's own resources (so it needs their credential). */
export const needsAccount = (plugin: GatewayPlugin) =>
  plugin === "agent.chat" || isSkillPlugin(plugin);

export interface PluginContext {
  userId: string | null;
  signal: AbortSignal;
  startedAt: number;
}

/** Whose account a call's model tokens are held from and metered to; null: paid up front. */
export type BillTo = string | null;

export interface PreparedPlugin {
  /**
   * The most the call's own model tokens can cost (micro-USD), which an up-front payment adds to
   * the plugin's price; 0 for plugins whose tokens are billed elsewhere (an agent's turn is
   * metered to its owner through the instance's model endpoint).
   */
  maxUsageMicroUsd: number;
  run(billTo: BillTo): Promise<Record<string, unknown>>;
}

/**
 * Checks what can be checked before anyone pays (a skill the caller's agent cannot use: 404,
 * unmet requirements: 400, its gateway down: 502; a model that does not exist: 404) and returns
 * the call to run.
 */
export async function preparePlugin(
  plugin: GatewayPlugin,
  input: unknown,
  ctx: PluginContext,
): Promise<PreparedPlugin> {
  if (plugin === "ai.completion") {
    return prepareCompletion(input as PluginInput<"ai.completion">, ctx);
  }
  if (!isSkillPlugin(plugin)) {
    return { maxUsageMicroUsd: 0, run: () => runAgentChat(input as AgentChatInput, ctx) };
  }
  if (!ctx.userId) throw new DomainError(401, `${plugin} needs your API key to name your agent`);
  const userId = ctx.userId;
  const name = skillName(plugin);
  const use = input as SkillInput;
  const prepared = await prepareSkillUse(userId, name, use.agentId);
  return {
    maxUsageMicroUsd: 0,
    run: async () => ({ ...(await runSkill(userId, name, use, prepared)) }),
  };
}

const skillName = (plugin: SkillPlugin) => plugin.slice("skill:".length);

type AgentChatInput = PluginInput<"agent.chat">;

/** A completion quoted (its worst case) and pinned to the quoted model. */
async function prepareCompletion(
  input: PluginInput<"ai.completion">,
  ctx: PluginContext,
): Promise<PreparedPlugin> {
  const { taskType, max_tokens, ...rest } = input;
  const body = {
    ...rest,
    model: rest.model ?? "",
    max_tokens: max_tokens ?? GATEWAY_DEFAULT_MAX_TOKENS,
  };
  const quote = await quoteCompletion(body, taskType);
  return {
    maxUsageMicroUsd: quote.maxCostMicroUsd,
    run: async (billTo) => {
      const result = await complete({
        endpoint: "chat",
        userId: billTo,
        instanceId: null,
        body: { ...body, model: quote.model },
        stream: false,
        signal: ctx.signal,
        startedAt: ctx.startedAt,
      });
      if (result.kind !== "json") throw new Error("unexpected stream");
      const { completion, model } = result;
      return {
        model: model.id,
        provider: model.provider,
        content: completion.text,
        usage: completion.usage,
      };
    },
  };
}

async function runAgentChat(input: AgentChatInput, ctx: PluginContext) {
  if (!ctx.userId) throw new DomainError(401, "agent.chat needs your API key to name your agent");
  const answer = await chat(ctx.userId, input);
  return { sessionId: answer.sessionId, reply: answer.reply, timestamp: answer.timestamp };
}
