import type postgres from "postgres";
import { hasWhiteLabel, WHITE_LABEL_PLANS } from "../billing/catalog.server.ts";
import { effectivePlan } from "../billing/subscriptions.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { requireMembership, requirePermission } from "./organisations.server.ts";

// White-label branding (issue 48, decision 0207): on a plan that sells white-label emails an
// organisation names itself, shows its logo and signs its members' emails with its sender name.

export interface Branding {
  displayName: string | null;
  logoUrl: string | null;
  senderName: string | null;
}

export interface BrandingView extends Branding {
  /** Whether the organisation's plan includes white-label (if not, nothing above applies). */
  available: boolean;
  /** The plans that include it. */
  plans: readonly string[];
}

export type BrandingPatch = { [K in keyof Branding]?: string | null | undefined };

const EMPTY: Branding = { displayName: null, logoUrl: null, senderName: null };

interface BrandingRow {
  display_name: string | null;
  logo_url: string | null;
  sender_name: string | null;
}

const toBranding = (r: BrandingRow | undefined): Branding =>
  r ? { displayName: r.display_name, logoUrl: r.logo_url, senderName: r.sender_name } : EMPTY;

async function storedBranding(
  organisationId: string,
  sql: postgres.Sql | postgres.TransactionSql = db(),
): Promise<Branding> {
  const [row] = await sql<BrandingRow[]>`
    select display_name, logo_url, sender_name from organisation_branding
    where organisation_id = ${organisationId}`;
  return toBranding(row);
}

const whiteLabelled = async (organisationId: string) =>
  hasWhiteLabel((await effectivePlan(organisationId)).plan);

/**
 * The branding the organisation's emails carry now: what it set, while its plan includes
 * white-label; nothing otherwise (a downgrade stops it without forgetting it).
 */
export async function activeBranding(organisationId: string): Promise<Branding> {
  const [available, stored] = await Promise.all([
    whiteLabelled(organisationId),
    storedBranding(organisationId),
  ]);
  return available ? stored : EMPTY;
}

/** What a member sees of the branding (any member; 404 otherwise). */
export async function brandingOf(organisationId: string, personId: string): Promise<BrandingView> {
  await requireMembership(organisationId, personId);
  const [available, stored] = await Promise.all([
    whiteLabelled(organisationId),
    storedBranding(organisationId),
  ]);
  return { ...stored, available, plans: WHITE_LABEL_PLANS };
}

/**
 * Changes the branding (members.manage): the given fields, null clearing one. 402 naming the
 * plans when the organisation's plan does not include white-label.
 */
export async function setBranding(
  organisationId: string,
  personId: string,
  patch: BrandingPatch,
): Promise<BrandingView> {
  await requirePermission(organisationId, personId, "members.manage", db());
  const { plan } = await effectivePlan(organisationId);
  if (!hasWhiteLabel(plan)) {
    const current = plan === "free" ? "it has no plan" : `its plan is ${plan}`;
    throw new DomainError(
      402,
      `White-label branding needs the ${WHITE_LABEL_PLANS.join(" or ")} plan; ${current}`,
    );
  }
  const set = (key: keyof Branding) => patch[key] !== undefined;
  const value = (key: keyof Branding) => patch[key] ?? null;
  const branding = await db().begin(async (t) => {
    const [row] = await t<BrandingRow[]>`
      insert into organisation_branding
        (organisation_id, display_name, logo_url, sender_name, updated_by)
      values (${organisationId}, ${value("displayName")}, ${value("logoUrl")},
              ${value("senderName")}, ${personId})
      on conflict (organisation_id) do update set
        display_name = case when ${set("displayName")} then excluded.display_name
                            else organisation_branding.display_name end,
        logo_url = case when ${set("logoUrl")} then excluded.logo_url
                        else organisation_branding.logo_url end,
        sender_name = case when ${set("senderName")} then excluded.sender_name
                           else organisation_branding.sender_name end,
        updated_by = excluded.updated_by, updated_at = now()
      returning display_name, logo_url, sender_name`;
    const changed = (Object.keys(patch) as Array<keyof Branding>).filter(set);
    await recordAudit(
      {
        action: "branding.changed",
        userId: organisationId,
        target: organisationId,
        details: { fields: changed.join(",") },
      },
      t,
    );
    return toBranding(row);
  });
  return { ...branding, available: true, plans: WHITE_LABEL_PLANS };
}
