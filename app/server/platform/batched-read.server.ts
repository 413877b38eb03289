// Reads that many concurrent requests make of different keys (an owner's version, an instance's
// latest sample), gathered into one statement: a read joins the batch that has not been sent
// yet, and `readMany` reads every key of it at once. A batch is sent after every read that
// joined it was asked for, so it sees every write committed before any of them (read-your-
// writes holds); a statement already under way is never joined, since it may have started
// before such a write. At most `maxInFlight` statements run at once; later reads wait in the
// next batch, which is what makes batches grow under load and costs nothing when idle.

interface Batch<K, V> {
  keys: Set<K>;
  result: Promise<Map<K, V>>;
  send: () => void;
}

export function batchedRead<K, V>(
  readMany: (keys: K[]) => Promise<Map<K, V>>,
  { maxInFlight = 2 }: { maxInFlight?: number } = {},
): (key: K) => Promise<V | undefined> {
  let pending: Batch<K, V> | undefined;
  let inFlight = 0;

  const dispatch = (): void => {
    const batch = pending;
    if (!batch) return;
    pending = undefined;
    inFlight++;
    const done = () => {
      inFlight--;
      if (pending) dispatch();
    };
    batch.result.then(done, done); // its readers get the error, if any
    batch.send();
  };

  const batchFor = (key: K): Batch<K, V> => {
    if (pending) {
      pending.keys.add(key);
      return pending;
    }
    const keys = new Set([key]);
    let send!: () => void;
    const result = new Promise<void>((resolve) => {
      send = resolve;
    }).then(() => readMany([...keys]));
    const batch: Batch<K, V> = { keys, result, send };
    pending = batch;
    // Reads asked for in this turn of the event loop join; a batch waits for a free slot.
    queueMicrotask(() => {
      if (inFlight < maxInFlight) dispatch();
    });
    return batch;
  };

  return async (key) => (await batchFor(key).result).get(key);
}
