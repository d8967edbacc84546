import { Inject, Injectable } from '@nestjs/common';
import type { Db } from '#libs/db';
import { ProcessMetrics, setJobCounts, setQueueDepth } from '#libs/metrics';
import { DB } from '../core/tokens.js';
import { JobPipeline } from '../jobs/job-pipeline.js';

const SCRAPE_QUERY_TIMEOUT_MS = 2_000;

function withTimeout<T>(work: Promise<T>): Promise<T> {
  return Promise.race([work, new Promise<T>((_, reject) => setTimeout(() => reject(new Error('timeout')), SCRAPE_QUERY_TIMEOUT_MS).unref())]);
}

/**
 * The api's /metrics. Job and queue gauges describe shared state, so every replica computes them
 * at scrape time from PostgreSQL and Redis (one GROUP BY over the status index, one LLEN) rather
 * than keeping counters that would drift; the dashboard takes max() over replicas.
 */
@Injectable()
export class ApiMetrics {
  readonly metrics = new ProcessMetrics('api');

  constructor(
    @Inject(DB) private readonly db: Db,
    private readonly pipeline: JobPipeline,
  ) {
    this.metrics.addCollector(() => this.collectJobs());
  }

  private async collectJobs(): Promise<void> {
    const [rows, bullWaiting] = await Promise.all([
      withTimeout(
        this.db.$queryRaw<{ status: string; n: number; undispatched: number }[]>`
          SELECT status::text AS status, count(*)::int AS n,
                 (count(*) FILTER (WHERE status = 'queued' AND dispatched_at IS NULL))::int AS undispatched
          FROM jobs GROUP BY status`,
      ),
      // Handed to the run queue but not yet taken by a worker.
      withTimeout(this.pipeline.queue.getWaitingCount()).catch(() => 0),
    ]);
    setJobCounts(Object.fromEntries(rows.map((r) => [r.status, r.n])));
    setQueueDepth(rows.reduce((sum, r) => sum + r.undispatched, 0) + bullWaiting);
  }
}
