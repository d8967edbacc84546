import {
  JOB_STATUSES,
  engineReady,
  httpRequestDuration,
  jobExecution,
  jobsTotal,
  outputBytesStored,
  requestsShed,
  queueDepth,
  queueWait,
  routerCallDuration,
  routerCalls,
  routerInflightSpend,
  webhookAttempts,
  webhookDeliveries,
  webhookOldestPending,
} from './definitions.js';

// Plain functions the code calls where things happen; callers need not know prom-client.

/** api: one HTTP response. `route` is the route template (`/api/v2/jobs/:id`), never the raw URL. */
export function httpRequestObserved(method: string, route: string, statusCode: number, seconds: number): void {
  httpRequestDuration.observe({ method, route, status_code: String(statusCode) }, seconds);
}

/** api: a request refused with 503 because a load threshold (`reason`) was passed. */
export function requestShed(reason: string): void {
  requestsShed.inc({ reason });
}

/** api, at scrape time: jobs per status; statuses missing from `counts` are set to 0. */
export function setJobCounts(counts: Record<string, number>): void {
  for (const status of new Set<string>([...JOB_STATUSES, ...Object.keys(counts)])) jobsTotal.set({ status }, counts[status] ?? 0);
}

/** api, at scrape time: jobs waiting for a worker (in PostgreSQL and in the run queue). */
export function setQueueDepth(jobs: number): void {
  queueDepth.set(jobs);
}

/** worker: a job started after waiting this long since submission. */
export function queueWaitObserved(seconds: number): void {
  queueWait.observe(Math.max(0, seconds));
}

/** worker: a job ended in `status` after running this long. */
export function jobExecutionObserved(status: string, seconds: number): void {
  jobExecution.observe({ status }, Math.max(0, seconds));
}

export function setEngineReady(workerId: string, ready: boolean): void {
  engineReady.set({ worker_id: workerId }, ready ? 1 : 0);
}

/** worker: bytes of one output newly written to the blob store (deduplicated copies add nothing). */
export function outputBytesObserved(bytes: number): void {
  if (bytes > 0) outputBytesStored.inc(bytes);
}

/** Router: one finished call of `model` (the canonical id) with its outcome bucket (`success` or an error bucket). */
export function routerCallObserved(model: string, bucket: string, seconds: number): void {
  routerCalls.inc({ model, bucket });
  routerCallDuration.observe({ model }, Math.max(0, seconds));
}

/** Router: the estimated spend, in cents, of every call still in flight (as known to this replica). */
export function setInflightSpend(cents: number): void {
  routerInflightSpend.set(Math.max(0, cents));
}

/** Router: adjusts the in-flight spend by a delta; `+estimate` when a call starts, `-estimate` when it ends. */
export function addInflightSpend(deltaCents: number): void {
  routerInflightSpend.inc(deltaCents);
}

/** webhooks: one delivery attempt and how it went (`delivered`, `http_error`, `timeout`, ...). */
export function webhookAttemptObserved(result: string): void {
  webhookAttempts.inc({ result });
}

/** webhooks: a delivery ended for good (`succeeded` or `failed`). */
export function webhookDeliveryEnded(outcome: 'succeeded' | 'failed'): void {
  webhookDeliveries.inc({ outcome });
}

/** webhooks, at scrape time: the age of the oldest event still to deliver (0: none). */
export function setOldestPendingWebhook(seconds: number): void {
  webhookOldestPending.set(Math.max(0, seconds));
}
