import { z } from "zod";
import { type AuditActor, recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";

// What each plugin of the paid gateway costs per call (table gateway_plugin_prices, integer
// micro-USD), changed by operators; every change is audited. docs/decisions/0128

/** The built-in plugins the gateway can route to (gateway-plugins.server.ts runs them). */
export const GATEWAY_PLUGINS = ["ai.completion", "agent.chat"] as const;
export type BuiltinPlugin = (typeof GATEWAY_PLUGINS)[number];
/** A marketplace skill run on the caller's agent (decision 0174). */
export type SkillPlugin = `skill:${string}`;
export type GatewayPlugin = BuiltinPlugin | SkillPlugin;

/** The price row every skill without a row of its own costs. */
export const ANY_SKILL = "skill:*";

const SKILL_PLUGIN = /^skill:[A-Za-z0-9._-]{1,100}$/;
export const isSkillPlugin = (plugin: string): plugin is SkillPlugin => SKILL_PLUGIN.test(plugin);

/** A plugin a caller can name: a built-in one or `skill:<name>`. */
export const gatewayPluginSchema = z.union([
  z.enum(GATEWAY_PLUGINS),
  z
    .string()
    .regex(SKILL_PLUGIN, "must be ai.completion, agent.chat or skill:<name>")
    .transform((p) => p as SkillPlugin),
]);

/** What a price row can name: a plugin, or `skill:*` (every skill without a row). */
const pricedPluginSchema = z.union([z.literal(ANY_SKILL), gatewayPluginSchema]);
type PricedPlugin = z.output<typeof pricedPluginSchema>;

/** At most 1000 USD a call: a typo of a few zeros should not bill a fortune. */
export const MAX_PRICE_MICRO_USD = 1_000 * 1_000_000;

export interface PluginPrice {
  plugin: PricedPlugin;
  priceMicroUsd: number;
  enabled: boolean;
  updatedBy: string | null;
  updatedAt: string;
}

interface PriceRow {
  plugin: PricedPlugin;
  price_micro_usd: string;
  enabled: boolean;
  updated_by: string | null;
  updated_at: Date;
}

const view = (r: PriceRow): PluginPrice => ({
  plugin: r.plugin,
  priceMicroUsd: Number(r.price_micro_usd),
  enabled: r.enabled,
  updatedBy: r.updated_by,
  updatedAt: r.updated_at.toISOString(),
});

export async function listPluginPrices(): Promise<PluginPrice[]> {
  const rows = await db()<PriceRow[]>`select * from gateway_plugin_prices order by plugin`;
  return rows.filter((r) => pricedPluginSchema.safeParse(r.plugin).success).map(view);
}

/**
 * The price of an enabled plugin; 404 for a plugin that does not exist or is switched off. A
 * skill's own row wins over `skill:*` (so an operator can price or switch off one skill).
 */
export async function pluginPrice(plugin: GatewayPlugin): Promise<number> {
  const [row] = await db()<PriceRow[]>`
    select * from gateway_plugin_prices
    where plugin = ${plugin} or (${isSkillPlugin(plugin)} and plugin = ${ANY_SKILL})
    order by plugin = ${ANY_SKILL} limit 1`;
  if (!row?.enabled) throw new DomainError(404, `plugin: ${plugin} is not available`);
  return Number(row.price_micro_usd);
}

const priceInput = z.object({
  plugin: pricedPluginSchema,
  priceMicroUsd: z.number().int().positive().max(MAX_PRICE_MICRO_USD),
  enabled: z.boolean(),
});

/** Sets a plugin's price (and whether it is offered); audited under `actor`. */
export async function setPluginPrice(
  plugin: string,
  priceMicroUsd: number,
  actor: AuditActor,
  enabled = true,
): Promise<PluginPrice> {
  const parsed = priceInput.safeParse({ plugin, priceMicroUsd, enabled });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new DomainError(400, `${issue?.path.join(".")}: ${issue?.message}`);
  }
  const input = parsed.data;
  // The change and its audit entry commit together.
  return db().begin(async (tx) => {
    const [before] = await tx<PriceRow[]>`
      select * from gateway_plugin_prices where plugin = ${input.plugin} for update`;
    const [row] = await tx<PriceRow[]>`
      insert into gateway_plugin_prices (plugin, price_micro_usd, enabled, updated_by)
      values (${input.plugin}, ${input.priceMicroUsd}, ${input.enabled}, ${actor.id ?? actor.type})
      on conflict (plugin) do update set price_micro_usd = excluded.price_micro_usd,
        enabled = excluded.enabled, updated_by = excluded.updated_by, updated_at = now()
      returning *`;
    await recordAudit(
      {
        action: "gateway.price_changed",
        actor,
        userId: null,
        target: input.plugin,
        details: {
          priceMicroUsd: input.priceMicroUsd,
          previousMicroUsd: before ? Number(before.price_micro_usd) : null,
          enabled: input.enabled,
        },
      },
      tx,
    );
    return view(row!);
  });
}
