import type { Db, Job } from '#libs/db';
import { storeOf, type InsertResult, type JobStore, type NewJobRow } from './job-store.js';

export type { InsertResult, NewJobRow };

const MAX_BATCH = 200;

interface Pending {
  row: NewJobRow;
  resolve: (r: InsertResult) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit for submissions: the jobs of all requests that arrive in the same turn of the
 * event loop are inserted by one statement, with each account's queue limit and each idempotency
 * key checked inside it. On this kind of machine a round trip to PostgreSQL costs more than the
 * work it carries, so one statement per batch instead of one per request is what lets the API
 * take thousands of submissions a second.
 */
export class InsertBatcher {
  private pending: Pending[] = [];
  private scheduled = false;

  private readonly jobs: JobStore;

  /**
   * `created`: called once per statement with the jobs it created, before their submissions go on,
   * for the work that follows every new job and is cheaper done for all at once (their `queued`
   * events, a dispatcher kick).
   */
  constructor(
    jobs: JobStore | Db,
    private readonly created: (jobs: Job[]) => void = () => undefined,
  ) {
    this.jobs = storeOf(jobs);
  }

  insert(row: NewJobRow): Promise<InsertResult> {
    return new Promise((resolve, reject) => {
      this.pending.push({ row, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, MAX_BATCH);
    this.scheduled = this.pending.length > 0;
    if (this.scheduled) setImmediate(() => void this.flush());
    if (batch.length === 0) return;
    try {
      const results = await this.run(batch.map((p) => p.row));
      batch.forEach((p, i) => p.resolve(results[i]!));
    } catch (err) {
      if (batch.length === 1) {
        batch[0]!.reject(err);
        return;
      }
      // A batch that failed as a whole (say a concurrent statement took an id first) is retried
      // row by row, so one bad row cannot fail its neighbours.
      for (const p of batch) this.run([p.row]).then((r) => p.resolve(r[0]!), p.reject);
    }
  }

  private async run(rows: NewJobRow[]): Promise<InsertResult[]> {
    const results = await this.jobs.insertMany(rows);
    const jobs = results.flatMap((r) => (r.kind === 'created' ? [r.job] : []));
    if (jobs.length > 0) {
      try {
        this.created(jobs);
      } catch {
        // What follows a job's creation never takes back its answer: the jobs exist.
      }
    }
    return results;
  }
}
