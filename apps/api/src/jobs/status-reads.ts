import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '#libs/db';

export interface JobStatusRow {
  id: string;
  status: string;
  createdAt: Date;
}

// Postgres takes at most 65,535 parameters a statement; well under it, and a quick index scan.
const MAX_IDS = 1_000;
// Streams poll once a second, each at its own moment: reads that come within this long of each
// other share a query (at most 100 queries a second), which a once-a-second poll does not notice.
const GATHER_MS = 10;

type Waiter = { resolve: (row: JobStatusRow | null) => void; reject: (err: unknown) => void };

/**
 * The status reads of event streams that poll (each waiting job's stream, every second), shared:
 * ids asked for within a few ms of each other, or while a query runs, are read by one query, and
 * the streams of one job share one answer. Thousands of open streams (an enterprise account may
 * hold 5,000) cost at most a hundred queries a second, not thousands.
 */
export class JobStatusReads {
  private waiting = new Map<string, Waiter[]>();
  private running = false;

  constructor(private readonly db: Db) {}

  read(jobId: string): Promise<JobStatusRow | null> {
    return new Promise((resolve, reject) => {
      const waiters = this.waiting.get(jobId);
      if (waiters) waiters.push({ resolve, reject });
      else this.waiting.set(jobId, [{ resolve, reject }]);
      if (!this.running) {
        this.running = true;
        void this.drain();
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.waiting.size > 0) {
      await sleep(GATHER_MS);
      const batch = new Map([...this.waiting].slice(0, MAX_IDS));
      for (const id of batch.keys()) this.waiting.delete(id);
      try {
        const rows = await this.db.job.findMany({ where: { id: { in: [...batch.keys()] } }, select: { id: true, status: true, createdAt: true } });
        const byId = new Map(rows.map((row) => [row.id, row]));
        for (const [id, waiters] of batch) for (const w of waiters) w.resolve(byId.get(id) ?? null);
      } catch (err) {
        for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
      }
    }
    this.running = false;
  }
}
