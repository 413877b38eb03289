// Credit leases: a web process holds a block of a user's credit (and daily allowance) in ONE
// conditional database statement and draws each call's reservation from it in memory, so the
// request path of a metered call touches the database once per block instead of once per call.
// The database still bounds every process: a lease is only granted when the balance minus what
// is already held covers it, so all processes together can never hold more than the balance.
// Settlement (metering.server.ts) debits the real costs from the lease in batches; a lease that
// is retired (too old, idle, exhausted) gives its unused remainder back once its calls are
// settled. docs/decisions/0025-credit-leases.md

import type { BillingMode } from "./budgets.server.ts";

export interface Lease {
  /** The ai_reservations row that holds the block. */
  id: string;
  userId: string;
  mode: BillingMode;
  /** The block taken. */
  size: number;
  /** What the database still holds for this lease (block minus the costs flushed so far). */
  dbHeld: number;
  /** What calls may still draw (block minus draws in flight minus settled costs). */
  available: number;
  /** Calls drawn and not yet metered. */
  outstanding: number;
  /** Calls metered whose settlement has not been written yet. */
  unflushed: number;
  createdAt: number;
  lastUsedAt: number;
  retired: boolean;
  /** Set once its remainder was given back (the row is gone). */
  released: boolean;
}

/** A lease rotates this often; its row is renewed while its calls run (hold-renewal.server.ts). */
export const LEASE_MAX_AGE_MS = 60_000;
/** A lease nobody drew from for this long is given back. */
export const LEASE_IDLE_MS = 5_000;

const active = new Map<string, Lease>();
const retiring = new Set<Lease>();

const keyOf = (userId: string, mode: BillingMode) => `${userId}:${mode}`;

export function activeLease(userId: string, mode: BillingMode): Lease | undefined {
  const lease = active.get(keyOf(userId, mode));
  if (lease && Date.now() - lease.createdAt > LEASE_MAX_AGE_MS) {
    retire(lease);
    return undefined;
  }
  return lease;
}

export function openLease(
  id: string,
  userId: string,
  mode: BillingMode,
  amountMicroUsd: number,
): Lease {
  const previous = active.get(keyOf(userId, mode));
  if (previous) retire(previous);
  const now = Date.now();
  const lease: Lease = {
    id,
    userId,
    mode,
    size: amountMicroUsd,
    dbHeld: amountMicroUsd,
    available: amountMicroUsd,
    outstanding: 0,
    unflushed: 0,
    createdAt: now,
    lastUsedAt: now,
    retired: false,
    released: false,
  };
  active.set(keyOf(userId, mode), lease);
  return lease;
}

/** A lease is replaced ahead of need below this share of its block or this close to its max age. */
export const REFILL_BELOW = 0.25;
export const REFILL_AGE_MS = LEASE_MAX_AGE_MS - 10_000;

/**
 * True when the next block should be taken now, in the background, so that no request waits on
 * the database for it: the lease is running low or about to rotate. docs/decisions/0086
 */
export function wantsRefill(lease: Lease): boolean {
  return (
    !lease.retired &&
    (lease.available < lease.size * REFILL_BELOW || Date.now() - lease.createdAt > REFILL_AGE_MS)
  );
}

/** Takes `amount` from the lease when it has that much; false otherwise. */
export function draw(lease: Lease, amount: number): boolean {
  if (lease.retired || lease.available < amount) return false;
  lease.available -= amount;
  lease.outstanding += 1;
  lease.lastUsedAt = Date.now();
  return true;
}

/**
 * Takes as much as the lease has up to `max`, at least `min`; 0 (nothing taken) when it has
 * less than `min`. For calls whose completion limit the layer sets to what the balance pays.
 */
export function drawUpTo(lease: Lease, min: number, max: number): number {
  const amount = Math.min(max, lease.available);
  if (amount < min || !draw(lease, amount)) return 0;
  return amount;
}

/** Part of a draw the call turned out not to need (rounding of its completion limit). */
export function giveBack(lease: Lease, amount: number): void {
  lease.available += amount;
}

/** A call ended (cost known): what it did not use goes back to the lease. */
export function returnDraw(lease: Lease, drawn: number, cost: number): void {
  lease.available += drawn - cost;
  lease.outstanding -= 1;
  lease.unflushed += 1;
  wake(lease);
}

// Calls that the user's credit cannot cover while this process has calls of theirs in flight
// wait for those to settle (their unused holds come back) instead of being refused at once:
// a burst is served as far as the balance goes, not as far as the first holds go
// (docs/decisions/0096).
const waiters = new Map<string, Array<() => void>>();

function wake(lease: Lease): void {
  const key = keyOf(lease.userId, lease.mode);
  const list = waiters.get(key);
  if (!list) return;
  waiters.delete(key);
  for (const resolve of list) resolve();
}

/** True while money held by this process for the user may still come back (calls in flight). */
export function pendingReturns(userId: string, mode: BillingMode): boolean {
  const lease = active.get(keyOf(userId, mode));
  if (lease && lease.outstanding > 0) return true;
  for (const l of retiring) {
    if (l.userId === userId && l.mode === mode && !l.released) return true;
  }
  return false;
}

/** Resolves when one of the user's calls in this process settles or a lease is given back. */
export function nextReturn(userId: string, mode: BillingMode): Promise<void> {
  const key = keyOf(userId, mode);
  return new Promise((resolve) => {
    const list = waiters.get(key) ?? [];
    list.push(resolve);
    waiters.set(key, list);
  });
}

/** A call's settlement was written: `consumed` left the database hold. */
export function settled(lease: Lease, consumed: number): void {
  lease.dbHeld -= consumed;
  lease.unflushed -= 1;
}

export function retire(lease: Lease): void {
  if (lease.retired) return;
  lease.retired = true;
  const key = keyOf(lease.userId, lease.mode);
  if (active.get(key) === lease) active.delete(key);
  retiring.add(lease);
}

/** Retires leases that are idle or too old (all idle ones with `everyIdle`). */
export function retireIdle(everyIdle = false): void {
  const now = Date.now();
  for (const lease of active.values()) {
    const idle = lease.outstanding === 0 && lease.unflushed === 0;
    if (
      (idle && (everyIdle || now - lease.lastUsedAt > LEASE_IDLE_MS)) ||
      now - lease.createdAt > LEASE_MAX_AGE_MS
    ) {
      retire(lease);
    }
  }
}

/** Retired leases whose calls are all settled: their remainder can be given back. */
export function releasable(): Lease[] {
  return [...retiring].filter((l) => l.outstanding === 0 && l.unflushed === 0 && !l.released);
}

export function markReleased(lease: Lease): void {
  lease.released = true;
  retiring.delete(lease);
  wake(lease);
}

/** Leases whose rows this process still has in the database: renewed while it lives. */
export function heldLeases(): Lease[] {
  return [...active.values(), ...retiring].filter((l) => !l.released);
}

/**
 * A lease whose row was swept while this process lived: retired, and holding nothing in the
 * database any more, so its calls' settlements take nothing from the account's holds.
 */
export function forfeit(lease: Lease): void {
  retire(lease);
  lease.dbHeld = 0;
}

export const hasRetiring = () => retiring.size > 0;
export const hasActive = () => active.size > 0;
