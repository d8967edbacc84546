import type { WebhookDelivery, WebhookEndpoint } from '#libs/db';

// The endpoint and delivery records as the API shows them. An endpoint's secret is shown only in
// the answers that make one (creation, rotation), never in a read.

export interface EndpointView {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  description: string;
  /** Why the service disabled it (a 410, days of failures); null otherwise. */
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
  secret?: string;
}

export interface DeliveryView {
  /** Also the `webhook-id` header of every attempt. */
  id: string;
  endpoint_id: string;
  event: string;
  job_id: string | null;
  status: string;
  attempts: number;
  response_code: number | null;
  latency_ms: number | null;
  error: string | null;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  created_at: string;
  completed_at: string | null;
}

export function endpointView(e: WebhookEndpoint, secret?: string): EndpointView {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    enabled: e.enabled,
    description: e.description,
    disabled_reason: e.disabledReason,
    created_at: e.createdAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
    ...(secret === undefined ? {} : { secret }),
  };
}

export function deliveryView(d: WebhookDelivery): DeliveryView {
  return {
    id: d.id,
    endpoint_id: d.endpointId,
    event: d.eventType,
    job_id: d.jobId,
    status: d.status,
    attempts: d.attempts,
    response_code: d.responseCode,
    latency_ms: d.latencyMs,
    error: d.error,
    next_attempt_at: d.status === 'pending' ? (d.nextAttemptAt?.toISOString() ?? null) : null,
    last_attempt_at: d.lastAttemptAt?.toISOString() ?? null,
    created_at: d.createdAt.toISOString(),
    completed_at: d.completedAt?.toISOString() ?? null,
  };
}
