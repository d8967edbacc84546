import { z } from 'zod';
import { additive, component, dateTime, pageOf, uuid } from './components.js';
import { PageQuerySchema } from './v2.js';

// Webhook endpoints and their deliveries (additive: Comfy's public v2 has no webhooks). The event
// names are wire facts, so they live here; libs/webhooks re-exports them.

export const TERMINAL_JOB_EVENTS = ['job.succeeded', 'job.failed', 'job.canceled', 'job.expired'] as const;
export const OPT_IN_JOB_EVENTS = ['job.running', 'job.output'] as const;
export const JOB_EVENTS = [...TERMINAL_JOB_EVENTS, ...OPT_IN_JOB_EVENTS] as const;

const list = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(', ');

export const WebhookEventTypeSchema = component(
  'WebhookEventType',
  z
    .enum(JOB_EVENTS)
    .describe(`Terminal: ${list(TERMINAL_JOB_EVENTS)}. Opt-in: \`job.running\`, \`job.output\` (one per committed output). \`webhook.test\` is sent by the test route only.`),
);

export const WEBHOOK_URL_MAX_LENGTH = 2048;
export const WEBHOOK_DESCRIPTION_MAX_LENGTH = 500;

export const WebhookEndpointRequestSchema = component(
  'WebhookEndpointRequest',
  z.strictObject({
    url: z.url().max(WEBHOOK_URL_MAX_LENGTH).describe('https (http only outside production); it must reach a public address.'),
    events: z.array(WebhookEventTypeSchema).min(1).optional().describe('Omitted: the four terminal job events.'),
    description: z.string().max(WEBHOOK_DESCRIPTION_MAX_LENGTH).optional(),
  }),
);

export const WebhookEndpointPatchSchema = component(
  'WebhookEndpointPatch',
  z.strictObject({
    url: z.url().max(WEBHOOK_URL_MAX_LENGTH).optional(),
    events: z.array(WebhookEventTypeSchema).min(1).optional(),
    enabled: z.boolean().optional().describe('true also clears `disabled_reason`.'),
    description: z.string().max(WEBHOOK_DESCRIPTION_MAX_LENGTH).optional(),
  }),
);

export const WebhookEndpointSchema = component(
  'WebhookEndpoint',
  z
    .object({
      id: uuid(),
      url: z.url(),
      events: z.array(WebhookEventTypeSchema),
      enabled: z.boolean(),
      description: z.string(),
      disabled_reason: z.string().nullable().describe('Why the service disabled the endpoint (it answered 410, or every attempt failed for 5 days).'),
      created_at: dateTime(),
      updated_at: dateTime(),
      secret: z.string().regex(/^whsec_/).optional().describe('The signing secret (Standard Webhooks format): only in the answers to creation and rotation.'),
    })
    .describe(additive('webhooks are not in the public contract.')),
);

export const WebhookEndpointListSchema = component('WebhookEndpointList', pageOf(WebhookEndpointSchema));

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;

export const WebhookDeliverySchema = component(
  'WebhookDelivery',
  z.object({
    id: uuid().describe('Also the `webhook-id` header of every attempt.'),
    endpoint_id: uuid(),
    event: z.string().describe('A WebhookEventType, or `webhook.test`.'),
    job_id: uuid().nullable(),
    status: z.enum(DELIVERY_STATUSES),
    attempts: z.int().describe('Attempts made (since the last redelivery).'),
    response_code: z.int().nullable().describe('Of the last attempt that got an answer.'),
    latency_ms: z.int().nullable().describe('Of the last attempt: from sending to the answer.'),
    error: z.string().nullable().describe('Why the last attempt failed.'),
    next_attempt_at: dateTime().nullable().describe('While pending.'),
    last_attempt_at: dateTime().nullable(),
    created_at: dateTime().describe('When the event happened.'),
    completed_at: dateTime().nullable(),
  }),
);

/** The deliveries list's query: the page, and one status to keep. */
export const WebhookDeliveryListQuerySchema = PageQuerySchema.extend({
  status: z.enum(DELIVERY_STATUSES, { error: `status must be one of ${DELIVERY_STATUSES.join(', ')}.` }).optional(),
});

export const WebhookDeliveryListSchema = component('WebhookDeliveryList', pageOf(WebhookDeliverySchema));
