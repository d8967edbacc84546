import { ROUTER_ERROR_TYPES, ref } from './schemas.js';
import { RETRY_AFTER, SERVICE_HEADERS, routerErrorResponses } from './responses.js';

// The model router (apps/api/src/router), described by hand from model-router.md: its controller
// belongs to another part of the code base. A test checks this table against the served routes.

type Obj = Record<string, unknown>;

// A router token, or (additive) the account's API key, as a console signed in with one sends it.
const security = [{ routerJwt: [] }, { apiKey: [] }];
const provider = { name: 'provider', in: 'path', required: true, schema: ref('RouterProviderSegment') };
const model = { name: 'model', in: 'path', required: true, schema: ref('RouterModelSegment') };

const SPEND_HEADERS = {
  'X-Committed-Spend-Current': { description: 'US cents committed to in-flight calls, excluding this one.', schema: { type: 'integer' } },
  'X-Committed-Spend-Limit': { description: 'Cap in US cents; present when the cap (not the call pool) refused the call.', schema: { type: 'integer' } },
  'X-Committed-Spend-Remaining': { description: 'US cents left under the cap, minimum 0.', schema: { type: 'integer', minimum: 0 } },
};

const SCHEMA_DOC_HEADERS = {
  ...SERVICE_HEADERS,
  ETag: { description: 'Strong entity tag of the document bytes.', schema: { type: 'string' } },
  'Cache-Control': { description: '`private, must-revalidate`.', schema: { type: 'string' } },
};

/** Every bucket the call route can answer with (all but the ones raised only by the catalog). */
const CALL_BUCKETS = ROUTER_ERROR_TYPES.filter((b) => b !== 'content_policy_violation' && b !== 'client_disconnected');

export const ROUTER_PATHS: Record<string, Obj> = {
  '/v1/models': {
    get: {
      tags: ['router'],
      summary: 'List models (one catalog page)',
      description: 'Walk with `next_cursor` while `has_more` is true; a short page does not mean the end.',
      security,
      parameters: [
        { name: 'cursor', in: 'query', required: false, schema: ref('RouterPageCursor'), description: "The previous page's `next_cursor`." },
        { name: 'limit', in: 'query', required: false, schema: { type: 'integer', default: 20, maximum: 100 }, description: 'Clamped to 100; zero or negative selects the default.' },
      ],
      responses: {
        200: { description: 'A page of the catalog.', headers: SERVICE_HEADERS, content: { 'application/json': { schema: ref('RouterModelListResponse') } } },
        ...routerErrorResponses(['invalid_input', 'unauthorized', 'forbidden', 'not_enabled', 'rate_limited', 'internal_error', 'service_unavailable']),
      },
    },
  },
  '/v1/models/{provider}/{model}': {
    parameters: [provider, model],
    get: {
      tags: ['router'],
      summary: "Read one model's catalog entry",
      security,
      responses: {
        200: { description: 'The model.', headers: SERVICE_HEADERS, content: { 'application/json': { schema: ref('RouterModelDetail') } } },
        ...routerErrorResponses(['unauthorized', 'forbidden', 'not_enabled', 'model_not_found', 'rate_limited', 'internal_error', 'service_unavailable']),
      },
    },
    post: {
      tags: ['router'],
      summary: 'Run the model synchronously',
      description:
        "The body is the partner model's native JSON input and passes through unchanged; so does a successful output, but for result media the " +
        'provider returned by URL: those are re-hosted and replaced by signed URLs valid 24 hours. Binary results (audio) come with their own media type. ' +
        'Retry after a timeout with the same `Idempotency-Key` (records kept 24 h): a completed first call is replayed (`Idempotent-Replayed: true`), a ' +
        'running one is waited on; the key with another model or body answers 409 `invalid_input` and dispatches nothing. A caller that disconnects is ' +
        'recorded as `client_disconnected` (never delivered; a completed generation is still billed).',
      security,
      parameters: [{ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', minLength: 1, maxLength: 255 } }],
      requestBody: { required: true, content: { 'application/json': { schema: ref('RouterModelInput') } } },
      responses: {
        200: {
          description: "The model's output.",
          headers: {
            ...SERVICE_HEADERS,
            'Idempotent-Replayed': { description: 'Present (`true`) on a replayed result.', schema: { type: 'string' } },
            'X-Service-Credits-Used': { description: 'Credits (US cents) the call used; not sent on a replay.', schema: { type: 'integer', minimum: 0 } },
          },
          content: { 'application/json': { schema: ref('RouterModelOutput') }, 'audio/*': { schema: { type: 'string', format: 'binary' } } },
        },
        ...routerErrorResponses(CALL_BUCKETS, { 429: SPEND_HEADERS, 504: RETRY_AFTER }),
        409: {
          description: '`invalid_input`: the `Idempotency-Key` was used with another model or body; nothing was dispatched.',
          headers: { ...SERVICE_HEADERS, 'X-Service-Error-Type': { schema: ref('RouterErrorType') } },
          content: { 'application/json': { schema: ref('RouterErrorResponse') } },
        },
        422: {
          description: 'The model rejected the content (`invalid_input` or `content_policy_violation`): RouterValidationErrorResponse, the bucket only in `X-Service-Error-Type`.',
          headers: { ...SERVICE_HEADERS, 'X-Service-Error-Type': { schema: ref('RouterErrorType') } },
          content: { 'application/json': { schema: ref('RouterValidationErrorResponse') } },
        },
        499: {
          description: '`client_disconnected`: recorded for a caller that left before the result; never delivered.',
          content: { 'application/json': { schema: ref('RouterErrorResponse') } },
        },
      },
    },
  },
  '/v1/models/{provider}/{model}/openapi.json': {
    parameters: [provider, model],
    get: {
      tags: ['router'],
      summary: "Read the model's input schema (an OpenAPI document)",
      security,
      parameters: [{ name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' }, description: 'An ETag from an earlier 200; `*` matches any.' }],
      responses: {
        200: { description: 'The document.', headers: SCHEMA_DOC_HEADERS, content: { 'application/json': { schema: ref('RouterModelInputSchemaDocument') } } },
        304: { description: 'Not modified (no body).', headers: SCHEMA_DOC_HEADERS },
        ...routerErrorResponses(['unauthorized', 'forbidden', 'not_enabled', 'model_not_found', 'rate_limited', 'internal_error', 'service_unavailable']),
      },
    },
  },
};
