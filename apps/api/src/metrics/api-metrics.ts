import { Inject, Injectable } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { JobStore, type RunPayload } from '#libs/jobs';
import { ProcessMetrics, setJobCounts, setQueueDepth } from '#libs/metrics';
import { RUN_QUEUE } from '../jobs/job-system.providers.js';

const SCRAPE_QUERY_TIMEOUT_MS = 2_000;

function withTimeout<T>(work: Promise<T>): Promise<T> {
  return Promise.race([work, new Promise<T>((_, reject) => setTimeout(() => reject(new Error('timeout')), SCRAPE_QUERY_TIMEOUT_MS).unref())]);
}

/**
 * The api's /metrics. Job and queue gauges describe shared state, so every replica computes them
 * at scrape time from PostgreSQL and Redis rather than keeping counters that would drift; the
 * dashboard takes max() over replicas. PostgreSQL's part reads the per-account counts its
 * triggers keep (job_status_counts, job_queue_counts), so a scrape costs as much with a hundred
 * retained jobs as with ten million.
 */
@Injectable()
export class ApiMetrics {
  readonly metrics = new ProcessMetrics('api');

  constructor(
    private readonly jobs: JobStore,
    @Inject(RUN_QUEUE) private readonly queue: Queue<RunPayload>,
  ) {
    this.metrics.addCollector(() => this.collectJobs());
  }

  private async collectJobs(): Promise<void> {
    const [counts, bullWaiting] = await Promise.all([
      withTimeout(this.jobs.counts()),
      // Handed to the run queue but not yet taken by a worker.
      withTimeout(this.queue.getWaitingCount()).catch(() => 0),
    ]);
    setJobCounts(counts.by_status);
    setQueueDepth(counts.undispatched + bullWaiting);
  }
}
