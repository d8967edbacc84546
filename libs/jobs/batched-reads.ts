import { setTimeout as sleep } from 'node:timers/promises';

type Waiter<V> = { resolve: (value: V | null) => void; reject: (err: unknown) => void };

export interface BatchedReadsOptions {
  /** How long the first id waits for others before its query: 0 for the same turn of the event loop. */
  gatherMs?: number;
  /** The most ids one query reads (the rest wait for the next). */
  maxIds?: number;
}

/**
 * Reads by id that share their queries, one query at a time: ids asked for while a query runs (or
 * within `gatherMs` of the first) are read together by the next one, and callers of the same id
 * share its answer. A slower query then means larger batches, not more queries. Ids asked for in
 * one turn of the event loop are read by the same query, as long as they fit in `maxIds`.
 */
export class BatchedReads<V> {
  private waiting = new Map<string, Waiter<V>[]>();
  private running = false;

  constructor(
    private readonly readAll: (ids: string[]) => Promise<Map<string, V>>,
    private readonly options: BatchedReadsOptions = {},
  ) {}

  /** The value read for `id`, or null when the query found none. */
  read(id: string): Promise<V | null> {
    return new Promise((resolve, reject) => {
      const waiters = this.waiting.get(id);
      if (waiters) waiters.push({ resolve, reject });
      else this.waiting.set(id, [{ resolve, reject }]);
      if (!this.running) {
        this.running = true;
        void this.drain();
      }
    });
  }

  private async drain(): Promise<void> {
    const { gatherMs = 0, maxIds = Infinity } = this.options;
    while (this.waiting.size > 0) {
      await (gatherMs > 0 ? sleep(gatherMs) : new Promise((resolve) => setImmediate(resolve)));
      let batch = this.waiting;
      if (batch.size <= maxIds) this.waiting = new Map();
      else {
        batch = new Map([...this.waiting].slice(0, maxIds));
        for (const id of batch.keys()) this.waiting.delete(id);
      }
      try {
        const found = await this.readAll([...batch.keys()]);
        for (const [id, waiters] of batch) for (const w of waiters) w.resolve(found.get(id) ?? null);
      } catch (err) {
        for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
      }
    }
    this.running = false;
  }
}
