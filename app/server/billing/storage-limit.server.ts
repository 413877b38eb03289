import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";

// The storage each user is owed (decision 0217): an operator's override when set; otherwise
// STORAGE_BASE_GB plus every completed storage upgrade, the upgrades counting unless the user's
// plan subscription has ended (the upgrade is sold as "the Pro plan with 50GB storage").

export const GIB = 1024 ** 3;

export interface StorageEntitlement {
  limitBytes: number;
  source: "override" | "plan";
  /** GB bought through the storage upgrade (counted or not). */
  upgradeGb: number;
  /** False when upgrades exist but stopped counting (the plan subscription ended). */
  upgradesCount: boolean;
}

export function storageBaseBytes(): number {
  return Math.round(env().STORAGE_BASE_GB * GIB);
}

export async function storageEntitlement(userId: string): Promise<StorageEntitlement> {
  const [row] = await db()<
    { override: string | null; upgrade_gb: number; had_plan: boolean; live_plan: boolean }[]
  >`
    select u.storage_limit_override_bytes as override,
      (select coalesce(sum(gigabytes), 0)::int from storage_grants g where g.user_id = u.id)
        as upgrade_gb,
      exists (select 1 from subscriptions s where s.user_id = u.id and s.kind = 'plan') as had_plan,
      exists (select 1 from subscriptions s where s.user_id = u.id and s.kind = 'plan'
        and s.status in ('active', 'trialing', 'past_due')) as live_plan
    from users u where u.id = ${userId}`;
  const upgradeGb = row?.upgrade_gb ?? 0;
  const upgradesCount = !row?.had_plan || row.live_plan;
  if (row?.override) {
    return { limitBytes: Number(row.override), source: "override", upgradeGb, upgradesCount };
  }
  return {
    limitBytes: storageBaseBytes() + (upgradesCount ? upgradeGb * GIB : 0),
    source: "plan",
    upgradeGb,
    upgradesCount,
  };
}

/** An operator's limit for one user (null: back to the plan's). */
export async function setStorageOverride(userId: string, bytes: number | null): Promise<void> {
  await db()`update users set storage_limit_override_bytes = ${bytes} where id = ${userId}`;
}
