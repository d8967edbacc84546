import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { ErrorCode } from '#libs/contracts';
import { JOB_EVENTS, TERMINAL_JOB_EVENTS } from '#libs/webhooks';
import { V2_COMMON } from './responses.js';
import { dateTime, nullable, pageOf, ref } from './schemas.js';
import { endpoint, errors, ok } from './v2-endpoints.js';

// The OpenAPI description of the v2 webhook routes and their schemas, in the pattern of
// v2-endpoints.ts: decorators on the controller, components merged into the document.

type Schema = Record<string, unknown>;

const list = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(', ');

export const WEBHOOK_SCHEMAS: Record<string, Schema> = {
  WebhookEventType: { type: 'string', enum: [...JOB_EVENTS], description: `Terminal: ${list(TERMINAL_JOB_EVENTS)}. Opt-in: \`job.running\`, \`job.output\` (one per committed output). \`webhook.test\` is sent by the test route only.` },
  WebhookEndpointRequest: {
    type: 'object',
    required: ['url'],
    additionalProperties: false,
    properties: {
      url: { type: 'string', format: 'uri', maxLength: 2048, description: 'https (http only outside production); it must reach a public address.' },
      events: { type: 'array', minItems: 1, items: ref('WebhookEventType'), description: 'Omitted: the four terminal job events.' },
      description: { type: 'string', maxLength: 500 },
    },
  },
  WebhookEndpointPatch: {
    type: 'object',
    additionalProperties: false,
    properties: {
      url: { type: 'string', format: 'uri', maxLength: 2048 },
      events: { type: 'array', minItems: 1, items: ref('WebhookEventType') },
      enabled: { type: 'boolean', description: 'true also clears `disabled_reason`.' },
      description: { type: 'string', maxLength: 500 },
    },
  },
  WebhookEndpoint: {
    type: 'object',
    required: ['id', 'url', 'events', 'enabled', 'description', 'disabled_reason', 'created_at', 'updated_at'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      url: { type: 'string', format: 'uri' },
      events: { type: 'array', items: ref('WebhookEventType') },
      enabled: { type: 'boolean' },
      description: { type: 'string' },
      disabled_reason: nullable('string', { description: 'Why the service disabled the endpoint (it answered 410, or every attempt failed for 5 days).' }),
      created_at: dateTime,
      updated_at: dateTime,
      secret: { type: 'string', pattern: '^whsec_', description: 'The signing secret (Standard Webhooks format): only in the answers to creation and rotation.' },
    },
  },
  WebhookEndpointList: pageOf('WebhookEndpoint'),
  WebhookDelivery: {
    type: 'object',
    required: ['id', 'endpoint_id', 'event', 'job_id', 'status', 'attempts', 'response_code', 'latency_ms', 'error', 'next_attempt_at', 'last_attempt_at', 'created_at', 'completed_at'],
    properties: {
      id: { type: 'string', format: 'uuid', description: 'Also the `webhook-id` header of every attempt.' },
      endpoint_id: { type: 'string', format: 'uuid' },
      event: { type: 'string', description: 'A WebhookEventType, or `webhook.test`.' },
      job_id: nullable('string', { format: 'uuid' }),
      status: { type: 'string', enum: ['pending', 'succeeded', 'failed'] },
      attempts: { type: 'integer', description: 'Attempts made (since the last redelivery).' },
      response_code: nullable('integer', { description: 'Of the last attempt that got an answer.' }),
      latency_ms: nullable('integer', { description: 'Of the last attempt: from sending to the answer.' }),
      error: nullable('string', { description: 'Why the last attempt failed.' }),
      next_attempt_at: nullable('string', { format: 'date-time', description: 'While pending.' }),
      last_attempt_at: nullable('string', { format: 'date-time' }),
      created_at: { ...dateTime, description: 'When the event happened.' },
      completed_at: nullable('string', { format: 'date-time' }),
    },
  },
  WebhookDeliveryList: pageOf('WebhookDelivery'),
};

const endpointId = ApiParam({ name: 'id', description: 'Webhook endpoint id.', schema: { type: 'string', format: 'uuid' } });
const paging = [
  ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', default: 20, maximum: 100 }, description: 'Clamped to 100; zero or less selects the default.' }),
  ApiQuery({ name: 'cursor', required: false, schema: { type: 'string' }, description: '`next_cursor` of the previous page.' }),
];
const READ: ErrorCode[] = [...V2_COMMON, 'not_found', 'invalid_request'];
const WRITE: ErrorCode[] = [...READ, 'invalid_json', 'unsupported_media_type', 'payload_too_large'];

export const WebhookDocs = {
  controller: () => applyDecorators(ApiTags('webhooks'), ApiBearerAuth('apiKey')),
  create: () =>
    applyDecorators(
      ...endpoint('Create a webhook endpoint', 'Answers the endpoint with its signing `secret`, shown only here and on rotation. At most 20 per account.'),
      ApiBody({ schema: ref('WebhookEndpointRequest') }),
      ok(201, 'WebhookEndpoint', 'The endpoint, with its secret.'),
      ...errors(...WRITE.filter((c) => c !== 'not_found')),
    ),
  list: () => applyDecorators(...endpoint('List your webhook endpoints', 'Newest first, with cursor pagination.'), ...paging, ok(200, 'WebhookEndpointList', 'One page.'), ...errors(...V2_COMMON, 'invalid_request')),
  get: () => applyDecorators(...endpoint('Read a webhook endpoint'), endpointId, ok(200, 'WebhookEndpoint', 'The endpoint (never its secret).'), ...errors(...READ)),
  update: () =>
    applyDecorators(...endpoint('Change a webhook endpoint', 'Any of url, events, enabled, description.'), endpointId, ApiBody({ schema: ref('WebhookEndpointPatch') }), ok(200, 'WebhookEndpoint', 'The endpoint.'), ...errors(...WRITE)),
  remove: () => applyDecorators(...endpoint('Delete a webhook endpoint', 'Its pending deliveries go with it.'), endpointId, ApiResponse({ status: 204, description: 'Deleted.' }), ...errors(...READ)),
  rotate: () =>
    applyDecorators(
      ...endpoint('Rotate an endpoint\'s signing secret', 'Answers the new secret. For 24 hours the old one signs beside it: each attempt carries both signatures, space-separated.'),
      endpointId,
      ok(200, 'WebhookEndpoint', 'The endpoint, with its new secret.'),
      ...errors(...READ),
    ),
  test: () =>
    applyDecorators(...endpoint('Send a test event', 'Queues a `webhook.test` event to the endpoint, whatever its events.'), endpointId, ok(202, 'WebhookDelivery', 'The queued delivery.'), ...errors(...READ)),
  deliveries: () =>
    applyDecorators(
      ...endpoint('List an endpoint\'s deliveries', 'Newest event first, with cursor pagination: the event, attempts, status, last response code and latency, next attempt.'),
      endpointId,
      ...paging,
      ApiQuery({ name: 'status', required: false, schema: { type: 'string', enum: ['pending', 'succeeded', 'failed'] } }),
      ok(200, 'WebhookDeliveryList', 'One page.'),
      ...errors(...READ),
    ),
  redeliver: () =>
    applyDecorators(
      ...endpoint('Redeliver an event', 'A new round of attempts on the retry schedule, with the same `webhook-id`. A delivery still pending is answered as it is.'),
      ApiParam({ name: 'id', description: 'Webhook delivery id.', schema: { type: 'string', format: 'uuid' } }),
      ok(202, 'WebhookDelivery', 'The delivery, pending again.'),
      ...errors(...READ),
    ),
};
