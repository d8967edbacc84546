import { Counter, Gauge, Histogram, type Metric } from 'prom-client';

// Every metric the services export. Names, types, labels and help texts are fixed by
// ops/metrics.json (the Grafana dashboard is built on them); a test keeps the two identical.
// The objects are created unregistered: each process registers only the ones it produces,
// so a worker never exports an api gauge stuck at 0 (the dashboard takes max() over replicas).

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricSpec {
  name: string;
  type: MetricType;
  labels: string[];
  help: string;
}

/** Statuses a job can be in; jobs_total exports each, zero included, so a drained state drops to 0. */
export const JOB_STATUSES = ['queued', 'running', 'canceling', 'succeeded', 'failed', 'canceled', 'expired'] as const;

const none: never[] = [];

export const httpRequestDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request latency by method, route template and status code (api).',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: none,
});

export const requestsShed = new Counter({
  name: 'http_requests_shed_total',
  help: 'Requests answered 503 service_unavailable without being served because the api was overloaded, by the threshold passed.',
  labelNames: ['reason'] as const,
  registers: none,
});

export const jobsTotal = new Gauge({
  name: 'jobs_total',
  help: 'Jobs currently in each status.',
  labelNames: ['status'] as const,
  registers: none,
});

export const queueDepth = new Gauge({
  name: 'queue_depth',
  help: 'Jobs queued and not yet running.',
  registers: none,
});

export const queueWait = new Histogram({
  name: 'queue_wait_seconds',
  help: 'Time from submission until a worker starts a job.',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600],
  registers: none,
});

export const jobExecution = new Histogram({
  name: 'job_execution_seconds',
  help: 'Time a job ran on its engine, by final status.',
  labelNames: ['status'] as const,
  buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
  registers: none,
});

export const engineReady = new Gauge({
  name: 'engine_ready',
  help: "1 when the worker's engine answers, else 0.",
  labelNames: ['worker_id'] as const,
  registers: none,
});

export const outputBytesStored = new Counter({
  name: 'output_bytes_stored_total',
  help: 'Bytes of job outputs written to blob storage.',
  registers: none,
});

export const routerCalls = new Counter({
  name: 'router_calls_total',
  help: 'Router calls by model and outcome bucket.',
  labelNames: ['model', 'bucket'] as const,
  registers: none,
});

export const routerCallDuration = new Histogram({
  name: 'router_call_duration_seconds',
  help: 'Router call latency by model.',
  labelNames: ['model'] as const,
  buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
  registers: none,
});

export const routerInflightSpend = new Gauge({
  name: 'router_inflight_spend_cents',
  help: 'Estimated spend of router calls still in flight, in cents.',
  registers: none,
});

export const webhookDeliveries = new Counter({
  name: 'webhook_deliveries_total',
  help: 'Webhook deliveries that ended, by outcome (succeeded, failed).',
  labelNames: ['outcome'] as const,
  registers: none,
});

export const webhookAttempts = new Counter({
  name: 'webhook_delivery_attempts_total',
  help: 'Webhook delivery attempts, by result (delivered, http_error, timeout, connection_error, blocked_address).',
  labelNames: ['result'] as const,
  registers: none,
});

export const webhookOldestPending = new Gauge({
  name: 'webhook_oldest_pending_seconds',
  help: 'Age of the oldest webhook event not yet delivered, in seconds; 0 when none is pending.',
  registers: none,
});

/** What each process exports. */
export const ROLE_METRICS = {
  api: [httpRequestDuration, requestsShed, jobsTotal, queueDepth, routerCalls, routerCallDuration, routerInflightSpend],
  worker: [queueWait, jobExecution, engineReady, outputBytesStored],
  webhooks: [webhookDeliveries, webhookAttempts, webhookOldestPending],
} satisfies Record<string, Metric[]>;

export type MetricsRole = keyof typeof ROLE_METRICS;

/** The specification of every metric, in the shape of ops/metrics.json. */
export async function metricSpecs(): Promise<MetricSpec[]> {
  const all = Object.values(ROLE_METRICS).flat();
  return Promise.all(
    all.map(async (metric) => {
      const json = (await metric.get()) as unknown as { name: string; type: string; help: string };
      const labels = (metric as unknown as { labelNames: string[] }).labelNames ?? [];
      return { name: json.name, type: json.type as MetricType, labels: [...labels], help: json.help };
    }),
  );
}
