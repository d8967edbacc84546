import { BatchedReads } from './batched-reads.js';
import type { JobStore } from './job-store.js';

const POSITIONS_TTL_MS = 250;

/**
 * Queue positions as the API answers them: several waiting jobs as of one moment, so that one
 * response never shows a newer job ahead of an older one: either all come from the same ranking,
 * or all are counted afresh in one query.
 *
 * The ranking orders the whole queue and is shared by everyone polling older jobs: it is made
 * at most every 250 ms per replica, or less often when it is itself slow (a long backlog), so the
 * database spends at most a quarter of its time on it. Brand-new jobs (a submission's answer) are
 * always counted on their own: cheaper, and a burst of submissions never waits on a ranking.
 */
export class QueuePositions {
  private positions: { at: number; map: Promise<Map<string, number>> } | null = null;
  private rankingMs = 0;
  /** Positions of brand-new jobs, counted together. No cap on the ids: those of one response must be counted by the same query. */
  private readonly freshReads: BatchedReads<number>;

  constructor(private readonly jobs: JobStore) {
    this.freshReads = new BatchedReads((ids) => jobs.queuePositionsOf(ids));
  }

  /** The queue position of one waiting job; see `of`. */
  async one(jobId: string, createdAt: Date): Promise<number | null> {
    return (await this.of([{ id: jobId, createdAt }])).get(jobId) ?? null;
  }

  async of(jobs: { id: string; createdAt: Date }[]): Promise<Map<string, number>> {
    if (jobs.length === 0) return new Map();
    const ids = jobs.map((job) => job.id);
    const now = Date.now();
    if (jobs.some((job) => now - job.createdAt.getTime() < POSITIONS_TTL_MS)) return this.fresh(ids);
    if (!this.positions || now - this.positions.at > Math.max(POSITIONS_TTL_MS, 4 * this.rankingMs)) {
      const map = this.jobs.queuePositions();
      this.positions = { at: now, map };
      void map.then(() => (this.rankingMs = Date.now() - now)).catch(() => undefined);
    }
    const ranking = this.positions;
    if (jobs.every((job) => ranking.at >= job.createdAt.getTime())) {
      const ranked = await ranking.map;
      // A job committed just after the ranking read its snapshot is missing from it.
      if (ids.every((id) => ranked.has(id))) return new Map(ids.map((id) => [id, ranked.get(id)!]));
    }
    return this.fresh(ids);
  }

  /** Fresh counts share queries (BatchedReads): a longer queue means larger batches, not more queries. */
  private async fresh(jobIds: string[]): Promise<Map<string, number>> {
    const positions = await Promise.all(jobIds.map((id) => this.freshReads.read(id)));
    // A job no longer waiting (started meanwhile) has no position.
    return new Map(jobIds.flatMap((id, i) => (positions[i] === null ? [] : [[id, positions[i]!] as const])));
  }
}
