import { reasonOf } from './unavailable.js';
import type { BlobStore } from './blob-store.js';

/**
 * Whether the store accepts writes, proved by writing (a full disk still answers reads). The proof
 * costs a small write and a delete, so one probe serves every readiness check for `intervalMs`:
 * however often probes come (several orchestrators, a busy replica), the store sees at most one
 * probe per interval, and concurrent checks share the one in flight.
 */
export class StorageWriteProbe {
  private last: { startedAt: number; outcome: Promise<string> } | null = null;

  constructor(
    private readonly store: Pick<BlobStore, 'probeWrite'>,
    private readonly intervalMs: number,
    /** A store that does not answer within this is reported as failing (the probe itself goes on). */
    private readonly timeoutMs = 2_000,
  ) {}

  /** `ok`, or `error: <reason>`. */
  check(): Promise<string> {
    const now = Date.now();
    if (!this.last || now - this.last.startedAt >= this.intervalMs) this.last = { startedAt: now, outcome: this.probe() };
    return this.last.outcome;
  }

  private async probe(): Promise<string> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      await Promise.race([this.store.probeWrite(), late]);
      return 'ok';
    } catch (err) {
      return `error: ${reasonOf(err)}`;
    } finally {
      clearTimeout(timer);
    }
  }
}
