import { db } from "../platform/db.server.ts";
import { logger } from "../platform/logger.server.ts";
import { forfeit, heldLeases } from "./credit-leases.server.ts";

// A credit hold (an ai_reservations row: a process's lease on a user's credit) lives as long as
// the process that holds it: the process renews its rows every HOLD_RENEW_MS, however long the
// calls drawn from them run (a streaming completion may last many minutes), and the sweep
// (job sweep-credit-holds, every minute) releases rows not renewed for HOLD_STALE_SECONDS,
// the holds of a process that died (kill -9, a lost host). A dead web's holds come back within
// two minutes instead of the ten of a fixed age from creation (decision 0223).

/** How often a process renews the holds it has in the database. */
export const HOLD_RENEW_MS = 20_000;
/** A hold not renewed for this long (three renewals missed) belongs to a dead process. */
export const HOLD_STALE_SECONDS = 60;

/**
 * Renews every hold this process has in the database, in one statement. A hold that is gone was
 * swept while this process lived (it could not renew for a minute: the database was away): its
 * lease is forfeited, so what its calls settle later is not taken from the account's holds twice.
 */
export async function renewHolds(): Promise<number> {
  const leases = heldLeases();
  if (leases.length === 0) return 0;
  const ids = leases.map((l) => l.id);
  // A row a settlement is writing right now is skipped, not waited for: its process is alive,
  // and waiting could deadlock with a flush that locks several of this process's rows.
  const rows = await db()<{ id: string; renewed: boolean }[]>`
    with renewed as (
      update ai_reservations set renewed_at = now()
      where id in (select id from ai_reservations where id = any(${ids}::text[])
        order by id for update skip locked)
      returning id
    )
    select r.id, n.id is not null as renewed
    from ai_reservations r left join renewed n on n.id = r.id
    where r.id = any(${ids}::text[])`;
  const present = new Set(rows.map((r) => r.id));
  // Given back meanwhile (its release committed while this statement ran) is not lost.
  const lost = leases.filter((l) => !present.has(l.id) && !l.released);
  for (const lease of lost) forfeit(lease);
  if (lost.length > 0) {
    logger().warn(
      { leases: lost.length, users: [...new Set(lost.map((l) => l.userId))] },
      "credit holds were swept while their process lived; their leases are forfeited",
    );
  }
  return rows.filter((r) => r.renewed).length;
}

let timer: NodeJS.Timeout | undefined;
let renewing = false;

/** Starts the renewal loop of this process (once; it never keeps the process alive). */
export function keepHoldsRenewed(): void {
  if (timer) return;
  timer = setInterval(() => {
    // One renewal at a time: a database that hangs does not pile them up.
    if (renewing) return;
    renewing = true;
    renewHolds()
      .catch((error: unknown) => logger().warn({ err: error }, "credit holds could not be renewed"))
      .finally(() => {
        renewing = false;
      });
  }, HOLD_RENEW_MS);
  timer.unref();
}

/** Releases the holds of processes that died: rows not renewed for HOLD_STALE_SECONDS. */
export async function sweepStaleReservations(): Promise<number> {
  const rows = await db()<{ n: number }[]>`
    with gone as (
      delete from ai_reservations
      where renewed_at < now() - make_interval(secs => ${HOLD_STALE_SECONDS})
      returning user_id, amount_micro_usd
    ), per_user as (
      select user_id, sum(amount_micro_usd) as amount, count(*) as n from gone group by user_id
    ), released as (
      update ai_accounts a set held_micro_usd = greatest(0, a.held_micro_usd - p.amount)
      from per_user p where a.user_id = p.user_id returning p.n
    )
    select coalesce(sum(n), 0)::int as n from released`;
  return rows[0]?.n ?? 0;
}
