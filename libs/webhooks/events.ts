// The events a webhook endpoint can be sent. Terminal job events go to every endpoint unless it
// chose otherwise; `job.running` and `job.output` (one per committed output) only when asked for.

// The names are wire facts, declared with the webhook schemas in libs/contracts.
import { JOB_EVENTS, OPT_IN_JOB_EVENTS, TERMINAL_JOB_EVENTS } from '#libs/contracts';

export { JOB_EVENTS, OPT_IN_JOB_EVENTS, TERMINAL_JOB_EVENTS };

/** Sent only by `POST /api/v2/webhooks/endpoints/{id}/test`, whatever the endpoint subscribed to. */
export const TEST_EVENT = 'webhook.test';

export type JobEventType = (typeof JOB_EVENTS)[number];
export type WebhookEventType = JobEventType | typeof TEST_EVENT;

export function isJobEventType(value: unknown): value is JobEventType {
  return typeof value === 'string' && (JOB_EVENTS as readonly string[]).includes(value);
}
