import { z } from 'zod';
import {
  AccountSchema, AssetFromHashSchema, AssetFromUrlSchema, AssetListQuerySchema, AssetListSchema, AssetSchema, AssetUploadSchema, ByteRangeSchema, CancelAfterSchema,
  HealthSchema, IdempotencyKeySchema, JobEventStreamSchema, JobListQuerySchema, JobListSchema, JobLogSchema, JobSchema, JobWorkflowSchema, LastEventIdSchema,
  PageQuerySchema, PreferWaitSchema, ReadinessSchema, SubmitJobRequestSchema, WebhookDeliveryListQuerySchema, WebhookDeliveryListSchema, WebhookDeliverySchema,
  WebhookEndpointListSchema, WebhookEndpointPatchSchema, WebhookEndpointRequestSchema, WebhookEndpointSchema, additive, type ErrorCode,
} from '#libs/contracts';
import { BYTES, RETRY_AFTER, bytes, envelopeErrors, json, jsonBody, noBody, type HeaderSpec, type Operation } from './operation.js';

// The v2 surface (jobs, assets, uploads, account, webhooks), its probes and the local blob route.

const security = [{ apiKey: [] }];
const COMMON: ErrorCode[] = ['unauthorized', 'forbidden', 'rate_limited', 'upstream_error', 'service_unavailable'];
const READ: ErrorCode[] = [...COMMON, 'not_found', 'invalid_request'];
const WRITE: ErrorCode[] = [...READ, 'invalid_json', 'unsupported_media_type', 'payload_too_large'];

const jobId = z.object({ id: z.guid().describe('Job id.') });
const assetId = z.object({ id: z.guid().describe('Asset id.') });
const endpointId = z.object({ id: z.guid().describe('Webhook endpoint id.') });
const uploadId = z.object({ id: z.string().describe('Upload id, the last segment of the `Location` the creation answered.') });
const LOCATION: Record<string, HeaderSpec> = { Location: { schema: z.string(), required: true } };
const TUS_RESUMABLE: Record<string, HeaderSpec> = { 'Tus-Resumable': { schema: z.literal('1.0.0'), description: '`1.0.0`.', required: true } };
const UPLOAD_ERRORS: ErrorCode[] = [...COMMON, 'invalid_request', 'not_found', 'upload_conflict'];

const jobs: Operation[] = [
  {
    method: 'post',
    path: '/api/v2/jobs',
    tag: 'jobs',
    summary: 'Submit a workflow as a job',
    description:
      "Validates the graph against the engines' node definitions, resolves asset references, checks credits and limits, then queues the job. " +
      'An `Idempotency-Key` is single-use: any later request with it answers 422 `idempotency_key_reuse` and runs nothing; ' +
      'additive: that 422 names the job the key created in `error.details.job_id`. ' +
      "On a deployment surface the graph must keep the pinned workflow's structure.",
    security,
    headers: {
      'Idempotency-Key': { schema: IdempotencyKeySchema, description: '1 to 255 visible ASCII characters (a UUID is a good choice); single-use, kept 24 h.' },
      Prefer: { schema: PreferWaitSchema, description: additive('`wait=N`: hold the response up to N seconds (capped) until the job ends.') },
      'Cancel-After': {
        schema: CancelAfterSchema,
        description: additive(
          "a deadline from now (`90s`, `5m`, `1h30m`, or seconds), capped by the tier's maximum: a job not finished by then, queued or running, ends `expired` with `error.code` `deadline_exceeded` (charged for what ran). Shown as `deadline_at`.",
        ),
      },
    },
    body: jsonBody(SubmitJobRequestSchema),
    responses: {
      201: json(JobSchema, 'The job was created.', { 'Preference-Applied': { schema: z.string(), description: additive('echoes `wait=N` when honoured.') } }),
      ...envelopeErrors([
        ...COMMON, 'invalid_request', 'invalid_json', 'invalid_workflow', 'workflow_format_ui', 'missing_asset', 'idempotency_key_reuse', 'insufficient_credits',
        'queue_full', 'deployment_not_ready', 'deployment_stopped', 'payload_too_large', 'unsupported_media_type', 'not_found',
      ]),
    },
  },
  {
    method: 'get',
    path: '/api/v2/jobs',
    tag: 'jobs',
    summary: 'List your jobs',
    description: additive('newest first, with cursor pagination.'),
    security,
    query: JobListQuerySchema,
    // `not_found`: on the deployment surface, an address without a deployment of the caller.
    responses: { 200: json(JobListSchema, 'One page of jobs.'), ...envelopeErrors([...COMMON, 'invalid_request', 'not_found']) },
  },
  {
    method: 'get',
    path: '/api/v2/jobs/{id}',
    tag: 'jobs',
    summary: 'Read a job (poll)',
    description: 'The source of truth for a job: status, progress, outputs, error, metrics.',
    security,
    params: jobId,
    responses: { 200: json(JobSchema, 'The job.'), ...envelopeErrors(READ) },
  },
  {
    method: 'get',
    path: '/api/v2/jobs/{id}/workflow',
    tag: 'jobs',
    summary: 'Read the workflow a job ran',
    description: 'Never contains `extra_data`.',
    security,
    params: jobId,
    responses: { 200: json(JobWorkflowSchema, 'The submitted graph.'), ...envelopeErrors(READ) },
  },
  {
    method: 'get',
    path: '/api/v2/jobs/{id}/events',
    tag: 'jobs',
    summary: "Stream a job's events (SSE)",
    description: 'Follow `urls.events`. The stream ends after the terminal `status` event. Additive: every event has an id; resume with `Last-Event-ID`.',
    security,
    params: jobId,
    headers: { 'Last-Event-ID': { schema: LastEventIdSchema, description: additive('replay events after this id, then continue live.') } },
    responses: { 200: { description: 'An event stream (`X-Accel-Buffering: no`).', content: { 'text/event-stream': JobEventStreamSchema } }, ...envelopeErrors([...READ, 'too_many_streams']) },
  },
  {
    method: 'post',
    path: '/api/v2/jobs/{id}/cancel',
    tag: 'jobs',
    summary: 'Cancel a job',
    description:
      'Idempotent. A queued job becomes `canceled` at once; a running one `canceling`, then `canceled` once the engine stops at a node or step boundary. A finished job is returned unchanged.',
    security,
    params: jobId,
    responses: { 200: json(JobSchema, 'The job: `canceling`, `canceled`, or its terminal state.'), ...envelopeErrors(READ) },
  },
  {
    method: 'get',
    path: '/api/v2/jobs/{id}/logs',
    tag: 'jobs',
    summary: "Read a job's captured log",
    description: additive('follow `urls.logs`; absent on surfaces that capture no logs (a routing 404 there).'),
    security,
    params: jobId,
    responses: {
      200: json(JobLogSchema, 'The log captured while the job ran.'),
      204: noBody('Nothing to read: the job has not ended, or nothing was captured.'),
      ...envelopeErrors(READ),
    },
  },
  {
    method: 'get',
    path: '/workflow',
    tag: 'jobs',
    summary: 'Read the pinned workflow (deployment surface)',
    description: 'Only on a deployment (`{deployment}.<domain>` or under `/deployment/{deployment}`); elsewhere 404.',
    security,
    responses: { 200: json(JobWorkflowSchema, 'The workflow this deployment runs.'), ...envelopeErrors([...COMMON, 'not_found', 'deployment_not_ready', 'deployment_stopped']) },
  },
];

const HEAD_ANSWERS = {
  401: noBody('Missing or invalid credentials (no body: HEAD).'),
  429: noBody('Rate limited (no body: HEAD).', RETRY_AFTER),
};

const assets: Operation[] = [
  {
    method: 'post',
    path: '/api/v2/assets',
    tag: 'assets',
    summary: 'Upload an asset',
    description: 'Multipart. The server computes the blake3 hash; identical bytes are stored once.',
    security,
    headers: {
      'Idempotency-Key': { schema: IdempotencyKeySchema, description: 'Single-use, kept 24 h: a later upload with it answers 422 `idempotency_key_reuse`; additive: naming `error.details.asset_id`.' },
    },
    body: { content: { 'multipart/form-data': AssetUploadSchema }, required: true },
    responses: {
      201: json(AssetSchema, 'Stored: the bytes were new.'),
      200: json(AssetSchema, 'Recorded over a blob that already existed (deduplicated).'),
      ...envelopeErrors([...COMMON, 'invalid_request', 'hash_mismatch', 'idempotency_key_reuse', 'payload_too_large', 'storage_limit_exceeded', 'unsupported_media_type']),
    },
  },
  {
    method: 'get',
    path: '/api/v2/assets',
    tag: 'assets',
    summary: 'List your assets',
    description: additive('your live uploads and job outputs, newest first, with cursor pagination; each with a fresh signed `url`.'),
    security,
    query: AssetListQuerySchema,
    responses: { 200: json(AssetListSchema, 'One page of assets.'), ...envelopeErrors([...COMMON, 'invalid_request']) },
  },
  {
    method: 'post',
    path: '/api/v2/assets/from-url',
    tag: 'assets',
    summary: 'Import an asset from a URL',
    description:
      additive("the service fetches the file (a model hub's download link, say) and records it like an upload: blake3 on the way, deduplicated, `models/<folder>/` paths checked and counted. ") +
      'Only http(s); targets in private, loopback, link-local or reserved ranges are refused, redirects included (at most 3); the size and the time are capped (`URL_IMPORT_MAX_BYTES`, `URL_IMPORT_TIMEOUT_SECONDS`).',
    security,
    headers: { 'Idempotency-Key': { schema: IdempotencyKeySchema, description: 'Single-use, as for uploads.' } },
    body: jsonBody(AssetFromUrlSchema),
    responses: {
      201: json(AssetSchema, 'Stored: the bytes were new to you.'),
      200: json(AssetSchema, 'Recorded over bytes you already had.'),
      ...envelopeErrors([...COMMON, 'invalid_request', 'invalid_json', 'hash_mismatch', 'idempotency_key_reuse', 'import_failed', 'payload_too_large', 'storage_limit_exceeded', 'unsupported_media_type']),
    },
  },
  {
    method: 'post',
    path: '/api/v2/assets/from-hash',
    tag: 'assets',
    summary: 'Create an asset from a hash you may already use',
    description: 'No bytes are sent.',
    security,
    body: jsonBody(AssetFromHashSchema),
    responses: {
      201: json(AssetSchema, 'A new asset record.'),
      200: json(AssetSchema, 'An identical record already existed.'),
      ...envelopeErrors([...COMMON, 'invalid_request', 'invalid_json', 'blob_not_found', 'storage_limit_exceeded', 'payload_too_large', 'unsupported_media_type']),
    },
  },
  {
    method: 'head',
    path: '/api/v2/assets/by-hash/{hash}',
    tag: 'assets',
    summary: 'Does a blob with this hash exist for me',
    description: 'No body either way.',
    security,
    params: z.object({ hash: z.string().describe('`blake3:<hex>` (or the bare hex).') }),
    responses: { 200: noBody('Yes.'), 404: noBody('No (or not usable by you).'), ...HEAD_ANSWERS },
  },
  {
    method: 'get',
    path: '/api/v2/assets/{id}',
    tag: 'assets',
    summary: 'Read an asset',
    description: 'With a fresh signed `url`.',
    security,
    params: assetId,
    responses: { 200: json(AssetSchema, 'The asset.'), ...envelopeErrors(READ) },
  },
  {
    method: 'delete',
    path: '/api/v2/assets/{id}',
    tag: 'assets',
    summary: 'Delete an asset',
    security,
    params: assetId,
    responses: { 204: noBody('Deleted.'), ...envelopeErrors([...READ, 'asset_in_use']) },
  },
  {
    method: 'get',
    path: '/api/v2/assets/{id}/content',
    tag: 'assets',
    summary: "Download an asset's bytes",
    description: 'Cloud surfaces redirect to a signed URL: fetch it without your credentials. The self-hosted surface streams the bytes and honours `Range`.',
    security,
    params: assetId,
    headers: { Range: { schema: ByteRangeSchema, description: 'Self-hosted surface: one byte range.' } },
    responses: {
      302: noBody('Redirect to a signed URL.', LOCATION),
      200: bytes('The bytes (self-hosted).'),
      206: bytes('A byte range (self-hosted).'),
      ...envelopeErrors([...READ, 'range_not_satisfiable']),
    },
  },
];

const uploads: Operation[] = [
  {
    method: 'post',
    path: '/api/v2/uploads',
    tag: 'uploads',
    summary: 'Create a resumable upload (tus)',
    description:
      additive('the tus 1.0.0 protocol (creation, creation-with-upload, termination, expiration), for large files such as models (up to `MAX_RESUMABLE_UPLOAD_BYTES`, default 10 GiB). ') +
      '`Upload-Metadata` carries `file_path` (or `filename`), and optionally `content_type`, `expected_hash` (`blake3:<hex>`) and `expires_in`. ' +
      'The last request of an upload answers with the Asset it became (201 here, 200 on a PATCH).',
    security,
    headers: {
      ...TUS_RESUMABLE,
      'Upload-Length': { schema: z.string(), description: "The file's size in bytes.", required: true },
      'Upload-Metadata': { schema: z.string(), description: 'Comma-separated `key base64(value)` pairs.', required: true },
    },
    body: { content: { 'application/offset+octet-stream': BYTES }, required: false },
    responses: {
      201: { description: 'Created (`Location` names the upload); with the Asset as its body when the request carried the whole file.', headers: LOCATION, content: { 'application/json': AssetSchema } },
      ...envelopeErrors([...UPLOAD_ERRORS, 'hash_mismatch', 'payload_too_large', 'storage_limit_exceeded']),
    },
  },
  {
    method: 'head',
    path: '/api/v2/uploads/{id}',
    tag: 'uploads',
    summary: "Read a resumable upload's offset (tus)",
    description: 'How many bytes arrived: resume the upload from `Upload-Offset`.',
    security,
    params: uploadId,
    headers: TUS_RESUMABLE,
    responses: {
      200: noBody('No body; `Upload-Offset` and `Upload-Length`.', { 'Upload-Offset': { schema: z.string(), required: true } }),
      404: noBody('No such upload of yours (no body: HEAD).'),
      ...HEAD_ANSWERS,
    },
  },
  {
    method: 'patch',
    path: '/api/v2/uploads/{id}',
    tag: 'uploads',
    summary: 'Append to a resumable upload (tus)',
    description: '`Content-Type: application/offset+octet-stream`, `Upload-Offset` equal to the current offset. The request that completes the file answers 200 with the Asset.',
    security,
    params: uploadId,
    headers: { ...TUS_RESUMABLE, 'Upload-Offset': { schema: z.string(), description: 'Where these bytes start.', required: true } },
    body: { content: { 'application/offset+octet-stream': BYTES }, required: true },
    responses: {
      204: noBody('Stored; `Upload-Offset` is the new offset.', { 'Upload-Offset': { schema: z.string(), required: true } }),
      200: json(AssetSchema, 'The upload is complete and became this asset.'),
      ...envelopeErrors([...UPLOAD_ERRORS, 'hash_mismatch', 'payload_too_large', 'storage_limit_exceeded', 'unsupported_media_type']),
    },
  },
  {
    method: 'delete',
    path: '/api/v2/uploads/{id}',
    tag: 'uploads',
    summary: 'Abandon a resumable upload (tus)',
    description: 'Its bytes are deleted.',
    security,
    params: uploadId,
    headers: TUS_RESUMABLE,
    responses: { 204: noBody('Deleted.'), ...envelopeErrors(UPLOAD_ERRORS) },
  },
];

const account: Operation[] = [
  {
    method: 'get',
    path: '/api/v2/account',
    tag: 'account',
    summary: 'Read your account',
    description:
      "Read-only: the credit balance and the ledger behind it (newest first, cursor paged by `limit` and `cursor`), the tier's limits and how much of them is in use now.",
    security,
    query: PageQuerySchema,
    responses: { 200: json(AccountSchema, 'The account.'), ...envelopeErrors([...COMMON, 'invalid_request']) },
  },
];

const webhooks: Operation[] = [
  {
    method: 'post',
    path: '/api/v2/webhooks/endpoints',
    tag: 'webhooks',
    summary: 'Create a webhook endpoint',
    description: 'Answers the endpoint with its signing `secret`, shown only here and on rotation. At most 20 per account.',
    security,
    body: jsonBody(WebhookEndpointRequestSchema),
    responses: { 201: json(WebhookEndpointSchema, 'The endpoint, with its secret.'), ...envelopeErrors(WRITE.filter((c) => c !== 'not_found')) },
  },
  {
    method: 'get',
    path: '/api/v2/webhooks/endpoints',
    tag: 'webhooks',
    summary: 'List your webhook endpoints',
    description: 'Newest first, with cursor pagination.',
    security,
    query: PageQuerySchema,
    responses: { 200: json(WebhookEndpointListSchema, 'One page.'), ...envelopeErrors([...COMMON, 'invalid_request']) },
  },
  {
    method: 'get',
    path: '/api/v2/webhooks/endpoints/{id}',
    tag: 'webhooks',
    summary: 'Read a webhook endpoint',
    security,
    params: endpointId,
    responses: { 200: json(WebhookEndpointSchema, 'The endpoint (never its secret).'), ...envelopeErrors(READ) },
  },
  {
    method: 'patch',
    path: '/api/v2/webhooks/endpoints/{id}',
    tag: 'webhooks',
    summary: 'Change a webhook endpoint',
    description: 'Any of url, events, enabled, description.',
    security,
    params: endpointId,
    body: jsonBody(WebhookEndpointPatchSchema),
    responses: { 200: json(WebhookEndpointSchema, 'The endpoint.'), ...envelopeErrors(WRITE) },
  },
  {
    method: 'delete',
    path: '/api/v2/webhooks/endpoints/{id}',
    tag: 'webhooks',
    summary: 'Delete a webhook endpoint',
    description: 'Its pending deliveries go with it.',
    security,
    params: endpointId,
    responses: { 204: noBody('Deleted.'), ...envelopeErrors(READ) },
  },
  {
    method: 'post',
    path: '/api/v2/webhooks/endpoints/{id}/rotate-secret',
    tag: 'webhooks',
    summary: "Rotate an endpoint's signing secret",
    description: 'Answers the new secret. For 24 hours the old one signs beside it: each attempt carries both signatures, space-separated.',
    security,
    params: endpointId,
    responses: { 200: json(WebhookEndpointSchema, 'The endpoint, with its new secret.'), ...envelopeErrors(READ) },
  },
  {
    method: 'post',
    path: '/api/v2/webhooks/endpoints/{id}/test',
    tag: 'webhooks',
    summary: 'Send a test event',
    description: 'Queues a `webhook.test` event to the endpoint, whatever its events.',
    security,
    params: endpointId,
    responses: { 202: json(WebhookDeliverySchema, 'The queued delivery.'), ...envelopeErrors(READ) },
  },
  {
    method: 'get',
    path: '/api/v2/webhooks/endpoints/{id}/deliveries',
    tag: 'webhooks',
    summary: "List an endpoint's deliveries",
    description: 'Newest event first, with cursor pagination: the event, attempts, status, last response code and latency, next attempt.',
    security,
    params: endpointId,
    query: WebhookDeliveryListQuerySchema,
    responses: { 200: json(WebhookDeliveryListSchema, 'One page.'), ...envelopeErrors(READ) },
  },
  {
    method: 'post',
    path: '/api/v2/webhooks/deliveries/{id}/redeliver',
    tag: 'webhooks',
    summary: 'Redeliver an event',
    description: 'A new round of attempts on the retry schedule, with the same `webhook-id`. A delivery still pending is answered as it is.',
    security,
    params: z.object({ id: z.guid().describe('Webhook delivery id.') }),
    responses: { 202: json(WebhookDeliverySchema, 'The delivery, pending again.'), ...envelopeErrors(READ) },
  },
];

const operational: Operation[] = [
  {
    method: 'get',
    path: '/healthz',
    tag: 'health',
    summary: 'Alive',
    description: 'The process answers, however loaded. For liveness probes.',
    security: [],
    responses: { 200: json(HealthSchema, 'Alive.') },
  },
  {
    method: 'get',
    path: '/readyz',
    tag: 'health',
    summary: 'Ready',
    description: 'PostgreSQL and Redis answer, the blob store takes writes, and the replica is not shedding load. For readiness probes.',
    security: [],
    responses: { 200: json(ReadinessSchema, 'Ready.'), 503: json(ReadinessSchema, 'Not ready; `checks` says which dependency failed.') },
  },
  {
    method: 'get',
    path: '/blobs/{hash}',
    tag: 'assets',
    summary: 'Fetch a blob by signed URL (local store)',
    description: 'The URLs the local-directory store signs. The signature is the credential; send no API key. `Range` is honoured.',
    security: [],
    params: z.object({ hash: z.string().regex(/^[0-9a-f]{64}$/).describe('blake3 hex.') }),
    query: z.object({
      exp: z.string().describe('Part of the signed URL (an integer).'),
      name: z.string().describe('Part of the signed URL (file name).'),
      ct: z.string().describe('Part of the signed URL (content type).'),
      sig: z.string().describe('Part of the signed URL.'),
    }),
    responses: { 200: bytes('The bytes.'), 206: bytes('A byte range.'), ...envelopeErrors(['forbidden', 'not_found', 'range_not_satisfiable']) },
  },
];

export const V2_OPERATIONS: Operation[] = [...operational, ...assets, ...uploads, ...account, ...jobs, ...webhooks];
