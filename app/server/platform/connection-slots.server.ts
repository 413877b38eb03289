// Slots of long-lived connections (live agent sockets, event streams, ingress requests and
// sockets) under per-key caps. Counted in this process's memory: a web process holds its own
// connections and knows at once when one ends, with no database write per socket; with R web
// replicas a user may hold up to R times a cap (docs/decisions/0220-live-socket-caps.md).

export interface Claim {
  /** What is counted, e.g. `user:usr_1` or `agent:agt_1`. */
  key: string;
  /** How many may be open under that key at once. */
  cap: number;
}

export interface ConnectionSlots {
  /**
   * A slot under every claim at once, or undefined (nothing taken) when one is full. The
   * returned release may be called any number of times; it frees the slots once.
   */
  take(...claims: Claim[]): (() => void) | undefined;
  /** Open under one key. */
  count(key: string): number;
  /** Open connections (each counted once, whatever the number of its claims). */
  total(): number;
  byKey(): Map<string, number>;
}

export function connectionSlots(): ConnectionSlots {
  const counts = new Map<string, number>();
  let total = 0;
  return {
    take(...claims) {
      if (claims.some(({ key, cap }) => (counts.get(key) ?? 0) >= cap)) return undefined;
      for (const { key } of claims) counts.set(key, (counts.get(key) ?? 0) + 1);
      total += 1;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total -= 1;
        for (const { key } of claims) {
          const left = (counts.get(key) ?? 1) - 1;
          if (left <= 0) counts.delete(key);
          else counts.set(key, left);
        }
      };
    },
    count: (key) => counts.get(key) ?? 0,
    total: () => total,
    byKey: () => new Map(counts),
  };
}
