import { reasonOf } from './unavailable.js';
import type { BlobStore } from './blob-store.js';

/**
 * Whether the store accepts writes, proved by writing (a full disk still answers reads). The proof
 * costs a small write and a delete, so one probe serves every readiness check for `intervalMs`:
 * however often probes come (several orchestrators, a busy replica), the store sees at most one
 * probe per interval, and concurrent checks share the one in flight.
 */
export class StorageWriteProbe {
  private last: { startedAt: number; outcome: Promise<void> } | null = null;

  constructor(
    private readonly store: Pick<BlobStore, 'probeWrite'>,
    private readonly intervalMs: number,
  ) {}

  /** Resolves when the store took the last probe's bytes; rejects with one line naming why not. */
  check(): Promise<void> {
    const now = Date.now();
    if (!this.last || now - this.last.startedAt >= this.intervalMs) {
      const outcome = this.store.probeWrite().catch((err: unknown) => {
        throw new Error(reasonOf(err), { cause: err });
      });
      // Handled by whoever checks; a result nobody asks for again must not count as unhandled.
      outcome.catch(() => undefined);
      this.last = { startedAt: now, outcome };
    }
    return this.last.outcome;
  }
}
