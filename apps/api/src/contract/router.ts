import { z } from 'zod';
import {
  ROUTER_BUCKETS, RouterErrorResponseSchema, RouterErrorTypeSchema, RouterIdempotencyKeySchema, RouterIfNoneMatchSchema, RouterModelDetailSchema, RouterModelInputSchema,
  RouterModelInputSchemaDocumentSchema, RouterModelListQuerySchema, RouterModelListResponseSchema, RouterModelOutputSchema, RouterModelSegmentSchema,
  RouterProviderSegmentSchema, RouterValidationErrorResponseSchema,
} from '#libs/contracts';
import { BYTES, RETRY_AFTER, SERVICE_REQUEST_ID, json, noBody, routerErrors, type HeaderSpec, type Operation } from './operation.js';

// The model router (/v1/models): the catalog, each model's input schema, and the synchronous call.

// A router token, or (additive) the account's API key, as a console signed in with one sends it.
const security: Record<string, string[]>[] = [{ routerJwt: [] }, { apiKey: [] }];
const modelPath = z.object({ provider: RouterProviderSegmentSchema, model: RouterModelSegmentSchema });

const SPEND_HEADERS: Record<string, HeaderSpec> = {
  'X-Committed-Spend-Current': { description: 'US cents committed to in-flight calls, excluding this one.', schema: z.int() },
  'X-Committed-Spend-Limit': { description: 'Cap in US cents; present when the cap (not the call pool) refused the call.', schema: z.int() },
  'X-Committed-Spend-Remaining': { description: 'US cents left under the cap, minimum 0.', schema: z.int().min(0) },
};

const SCHEMA_DOC_HEADERS: Record<string, HeaderSpec> = {
  ...SERVICE_REQUEST_ID,
  ETag: { description: 'Strong entity tag of the document bytes.', schema: z.string(), required: true },
  'Cache-Control': { description: '`private, must-revalidate`.', schema: z.string(), required: true },
};

const READ_BUCKETS = ['invalid_input', 'unauthorized', 'forbidden', 'not_enabled', 'model_not_found', 'rate_limited', 'internal_error', 'service_unavailable'] as const;
/** Every bucket the call route can answer with (all but the ones raised only by the catalog). */
const CALL_BUCKETS = ROUTER_BUCKETS.filter((b) => b !== 'content_policy_violation' && b !== 'client_disconnected');
const ERROR_TYPE = { 'X-Service-Error-Type': { schema: RouterErrorTypeSchema, required: true } };

export const ROUTER_OPERATIONS: Operation[] = [
  {
    method: 'get',
    path: '/v1/models',
    tag: 'router',
    summary: 'List models (one catalog page)',
    description: 'Walk with `next_cursor` while `has_more` is true; a short page does not mean the end.',
    security,
    query: RouterModelListQuerySchema,
    responses: {
      200: json(RouterModelListResponseSchema, 'A page of the catalog.', SERVICE_REQUEST_ID),
      ...routerErrors(['invalid_input', 'unauthorized', 'forbidden', 'not_enabled', 'rate_limited', 'internal_error', 'service_unavailable']),
    },
  },
  {
    method: 'get',
    path: '/v1/models/{provider}/{model}',
    tag: 'router',
    summary: "Read one model's catalog entry",
    security,
    params: modelPath,
    responses: { 200: json(RouterModelDetailSchema, 'The model.', SERVICE_REQUEST_ID), ...routerErrors(READ_BUCKETS) },
  },
  {
    method: 'post',
    path: '/v1/models/{provider}/{model}',
    tag: 'router',
    summary: 'Run the model synchronously',
    description:
      "The body is the partner model's native JSON input and passes through unchanged; so does a successful output, but for result media the " +
      'provider returned by URL: those are re-hosted and replaced by signed URLs valid 24 hours. Binary results (audio) come with their own media type. ' +
      'Retry after a timeout with the same `Idempotency-Key` (records kept 24 h): a completed first call is replayed (`Idempotent-Replayed: true`); ' +
      'additive: a running one is waited on. The key with another model or body answers 409 `invalid_input` and dispatches nothing. A caller that disconnects is ' +
      'recorded as `client_disconnected` (never delivered; a completed generation is still billed).',
    security,
    params: modelPath,
    headers: { 'Idempotency-Key': { schema: RouterIdempotencyKeySchema } },
    body: { content: { 'application/json': RouterModelInputSchema }, required: true },
    responses: {
      200: {
        description: "The model's output.",
        headers: {
          ...SERVICE_REQUEST_ID,
          'Idempotent-Replayed': { description: 'Present (`true`) on a replayed result.', schema: z.string() },
          'X-Service-Credits-Used': { description: 'Credits (US cents) the call used; not sent on a replay.', schema: z.int().min(0) },
        },
        content: { 'application/json': RouterModelOutputSchema, 'audio/*': BYTES },
      },
      ...routerErrors(CALL_BUCKETS, { 429: SPEND_HEADERS, 504: RETRY_AFTER }),
      409: {
        description: '`invalid_input`: the `Idempotency-Key` was used with another model or body; nothing was dispatched.',
        headers: { ...SERVICE_REQUEST_ID, ...ERROR_TYPE },
        content: { 'application/json': RouterErrorResponseSchema },
      },
      422: {
        description: 'The model rejected the content (`invalid_input` or `content_policy_violation`): RouterValidationErrorResponse, the bucket only in `X-Service-Error-Type`.',
        headers: { ...SERVICE_REQUEST_ID, ...ERROR_TYPE },
        content: { 'application/json': RouterValidationErrorResponseSchema },
      },
      499: { description: '`client_disconnected`: recorded for a caller that left before the result; never delivered.', content: { 'application/json': RouterErrorResponseSchema } },
    },
  },
  {
    method: 'get',
    path: '/v1/models/{provider}/{model}/openapi.json',
    tag: 'router',
    summary: "Read the model's input schema (an OpenAPI document)",
    security,
    params: modelPath,
    headers: { 'If-None-Match': { schema: RouterIfNoneMatchSchema } },
    responses: {
      200: json(RouterModelInputSchemaDocumentSchema, 'The document.', SCHEMA_DOC_HEADERS),
      304: noBody('Not modified (no body).', SCHEMA_DOC_HEADERS),
      ...routerErrors(READ_BUCKETS),
    },
  },
];
