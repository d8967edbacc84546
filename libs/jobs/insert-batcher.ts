import type { Db, Job } from '#libs/db';
import { storeOf, type InsertResult, type JobStore, type NewJobRow } from './job-store.js';

export type { InsertResult, NewJobRow };

const MAX_BATCH = 200;
// Statements in flight at once. Batches of one account wait for each other anyway (each locks the
// account's queue counts until it commits), so more in flight only splits the same rows into
// smaller statements: PostgreSQL's cost is mostly per statement and commit, not per row. At 64
// clients on 2 cores, 2, 4 and 8 gave the same CPU per submission (less than the pool's 20) and 4
// the steadiest p99.
export const MAX_IN_FLIGHT = 4;

interface Pending {
  row: NewJobRow;
  resolve: (r: InsertResult) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit for submissions: the jobs of all requests that arrive in the same turn of the
 * event loop are inserted by one statement, with each account's queue limit and each idempotency
 * key checked inside it; while MAX_IN_FLIGHT statements run, new rows wait and go together in the
 * next one. On this kind of machine a round trip to PostgreSQL costs more than the work it
 * carries, so one statement per batch instead of one per request is what lets the API take
 * thousands of submissions a second.
 */
export class InsertBatcher {
  private pending: Pending[] = [];
  private scheduled = false;
  private inFlight = 0;

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
      this.schedule();
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    // At the limit: the statement that ends next sends what gathered meanwhile.
    if (this.inFlight >= MAX_IN_FLIGHT || this.pending.length === 0) return;
    const batch = this.pending.splice(0, MAX_BATCH);
    if (this.pending.length > 0) this.schedule();
    this.inFlight++;
    try {
      const results = await this.run(batch.map((p) => p.row));
      batch.forEach((p, i) => p.resolve(results[i]!));
    } catch (err) {
      if (batch.length === 1) batch[0]!.reject(err);
      // A batch that failed as a whole (say a concurrent statement took an id first) is retried
      // row by row, so one bad row cannot fail its neighbours.
      else for (const p of batch) this.run([p.row]).then((r) => p.resolve(r[0]!), p.reject);
    } finally {
      this.inFlight--;
      if (this.pending.length > 0) this.schedule();
    }
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => void this.flush());
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
