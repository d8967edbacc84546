export { ProcessMetrics } from './registry.js';
export type { Collector } from './registry.js';
export { JOB_STATUSES, ROLE_METRICS, metricSpecs } from './definitions.js';
export type { MetricSpec, MetricType, MetricsRole } from './definitions.js';
export {
  addInflightSpend,
  httpRequestObserved,
  jobExecutionObserved,
  outputBytesObserved,
  queueWaitObserved,
  requestShed,
  routerCallObserved,
  setEngineReady,
  setInflightSpend,
  setJobCounts,
  setQueueDepth,
  setOldestPendingWebhook,
  webhookAttemptObserved,
  webhookDeliveryEnded,
} from './observe.js';
