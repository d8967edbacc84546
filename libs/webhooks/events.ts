// The events a webhook endpoint can be sent. Terminal job events go to every endpoint unless it
// chose otherwise; `job.running` and `job.output` (one per committed output) only when asked for.

export const TERMINAL_JOB_EVENTS = ['job.succeeded', 'job.failed', 'job.canceled', 'job.expired'] as const;
export const OPT_IN_JOB_EVENTS = ['job.running', 'job.output'] as const;
export const JOB_EVENTS = [...TERMINAL_JOB_EVENTS, ...OPT_IN_JOB_EVENTS] as const;

/** Sent only by `POST /api/v2/webhooks/endpoints/{id}/test`, whatever the endpoint subscribed to. */
export const TEST_EVENT = 'webhook.test';

export type JobEventType = (typeof JOB_EVENTS)[number];
export type WebhookEventType = JobEventType | typeof TEST_EVENT;

export function isJobEventType(value: unknown): value is JobEventType {
  return typeof value === 'string' && (JOB_EVENTS as readonly string[]).includes(value);
}
