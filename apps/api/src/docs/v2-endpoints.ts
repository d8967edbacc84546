import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiConsumes, ApiHeader, ApiIncludeEndpoint, ApiOperation, ApiParam, ApiProduces, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { ErrorCode } from '#libs/contracts';
import { RETRY_AFTER, V2_COMMON, envelopeResponses } from './responses.js';
import { ref } from './schemas.js';

// The OpenAPI description of the v2, health and blob routes, applied on their controllers as
// decorators (`@JobDocs.submit()`), so the document is generated from the routes that exist.

type Obj = Record<string, unknown>;

/** Puts the route in the document (the builder includes decorated routes only). */
export function endpoint(summary: string, description?: string) {
  return [ApiIncludeEndpoint(), ApiOperation({ summary, ...(description ? { description } : {}) })];
}

export function errors(...codes: ErrorCode[]) {
  return Object.entries(envelopeResponses(codes)).map(([status, response]) => ApiResponse({ status: Number(status), ...(response as Obj) } as never));
}

export function ok(status: number, schemaName: string | null, description: string, headers?: Obj) {
  return ApiResponse({ status, description, ...(schemaName ? { schema: ref(schemaName) } : {}), ...(headers ? { headers } : {}) } as never);
}

const jobId = ApiParam({ name: 'id', description: 'Job id.', schema: { type: 'string', format: 'uuid' } });
const assetId = ApiParam({ name: 'id', description: 'Asset id.', schema: { type: 'string', format: 'uuid' } });
const READ: ErrorCode[] = [...V2_COMMON, 'not_found', 'invalid_request'];

export const JobDocs = {
  controller: () => applyDecorators(ApiTags('jobs'), ApiBearerAuth('apiKey')),
  submit: () =>
    applyDecorators(
      ...endpoint(
        'Submit a workflow as a job',
        'Validates the graph against the engines\' node definitions, resolves asset references, checks credits and limits, then queues the job. ' +
          'An `Idempotency-Key` is single-use: any later request with it answers 422 `idempotency_key_reuse` and runs nothing; ' +
          'beyond the public contract (additive), that 422 names the job the key created in `error.details.job_id`. ' +
          'On a deployment surface the graph must keep the pinned workflow\'s structure.',
      ),
      ApiHeader({ name: 'Idempotency-Key', required: false, description: '1 to 255 visible ASCII characters (a UUID is a good choice); single-use, kept 24 h.' }),
      ApiHeader({ name: 'Prefer', required: false, description: '`wait=N`: hold the response up to N seconds (capped) until the job ends.' }),
      ApiHeader({ name: 'Cancel-After', required: false, description: 'A deadline from now (`90s`, `5m`, `1h30m`, or seconds), capped by the tier\'s maximum: a job not finished by then, queued or running, ends `expired` with `error.code` `deadline_exceeded` (charged for what ran). Shown as `deadline_at`.' }),
      ApiBody({ schema: ref('SubmitJobRequest') }),
      ok(201, 'Job', 'The job was created.', { 'Preference-Applied': { description: 'Echoes `wait=N` when honoured.', schema: { type: 'string' } } }),
      ...errors(
        ...V2_COMMON,
        'invalid_request',
        'invalid_json',
        'invalid_workflow',
        'workflow_format_ui',
        'missing_asset',
        'idempotency_key_reuse',
        'insufficient_credits',
        'queue_full',
        'deployment_not_ready',
        'deployment_stopped',
        'payload_too_large',
        'unsupported_media_type',
      ),
    ),
  list: () =>
    applyDecorators(
      ...endpoint('List your jobs', 'Newest first, with cursor pagination.'),
      ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', default: 20, maximum: 100 }, description: 'Clamped to 100; zero or less selects the default.' }),
      ApiQuery({ name: 'cursor', required: false, schema: { type: 'string' }, description: '`next_cursor` of the previous page.' }),
      ApiQuery({ name: 'status', required: false, schema: { type: 'string' }, description: 'Comma-separated JobStatus values.' }),
      ok(200, 'JobList', 'One page of jobs.'),
      ...errors(...V2_COMMON, 'invalid_request'),
    ),
  get: () => applyDecorators(...endpoint('Read a job (poll)', 'The source of truth for a job: status, progress, outputs, error, metrics.'), jobId, ok(200, 'Job', 'The job.'), ...errors(...READ)),
  workflow: () =>
    applyDecorators(...endpoint('Read the workflow a job ran', 'Never contains `extra_data`.'), jobId, ok(200, 'JobWorkflow', 'The submitted graph.'), ...errors(...READ)),
  events: () =>
    applyDecorators(
      ...endpoint('Stream a job\'s events (SSE)', 'Follow `urls.events`. Resume with `Last-Event-ID`. The stream ends after the terminal `status` event.'),
      jobId,
      ApiHeader({ name: 'Last-Event-ID', required: false, description: 'Replay events after this id, then continue live.' }),
      ApiProduces('text/event-stream'),
      ApiResponse({
        status: 200,
        description: 'An event stream (`X-Accel-Buffering: no`).',
        content: { 'text/event-stream': { schema: ref('JobEventStream') } },
      } as never),
      ...errors(...READ, 'too_many_streams'),
    ),
  cancel: () =>
    applyDecorators(
      ...endpoint(
        'Cancel a job',
        'Idempotent. A queued job becomes `canceled` at once; a running one `canceling`, then `canceled` once the engine stops at a node or step boundary. A finished job is returned unchanged.',
      ),
      jobId,
      ok(200, 'Job', 'The job: `canceling`, `canceled`, or its terminal state.'),
      ...errors(...READ),
    ),
  logs: () =>
    applyDecorators(
      ...endpoint('Read a job\'s captured log', 'Follow `urls.logs`; absent on surfaces that capture no logs (a routing 404 there).'),
      jobId,
      ok(200, 'JobLog', 'The log captured while the job ran.'),
      ApiResponse({ status: 204, description: 'Nothing to read: the job has not ended, or nothing was captured.' }),
      ...errors(...READ),
    ),
  pinnedWorkflow: () =>
    applyDecorators(
      ...endpoint('Read the pinned workflow (deployment surface)', 'Only on a deployment (`{deployment}.<domain>` or under `/deployment/{deployment}`); elsewhere 404.'),
      ok(200, 'JobWorkflow', 'The workflow this deployment runs.'),
      ...errors(...V2_COMMON, 'not_found', 'deployment_not_ready', 'deployment_stopped'),
    ),
};

export const AssetDocs = {
  controller: () => applyDecorators(ApiTags('assets'), ApiBearerAuth('apiKey')),
  upload: () =>
    applyDecorators(
      ...endpoint('Upload an asset', 'Multipart. The server computes the blake3 hash; identical bytes are stored once.'),
      ApiConsumes('multipart/form-data'),
      ApiHeader({ name: 'Idempotency-Key', required: false, description: 'Single-use, kept 24 h: a later upload with it answers 422 `idempotency_key_reuse` naming `error.details.asset_id` (additive).' }),
      ApiBody({ schema: ref('AssetUpload') }),
      ok(201, 'Asset', 'Stored: the bytes were new.'),
      ok(200, 'Asset', 'Recorded over a blob that already existed (deduplicated).'),
      ...errors(...V2_COMMON, 'invalid_request', 'hash_mismatch', 'idempotency_key_reuse', 'payload_too_large', 'storage_limit_exceeded', 'unsupported_media_type'),
    ),
  fromUrl: () =>
    applyDecorators(
      ...endpoint(
        'Import an asset from a URL',
        'The service fetches the file (a model hub\'s download link, say) and records it like an upload: blake3 on the way, deduplicated, `models/<folder>/` paths checked and counted. ' +
          'Only http(s); targets in private, loopback, link-local or reserved ranges are refused, redirects included (at most 3); the size and the time are capped (`URL_IMPORT_MAX_BYTES`, `URL_IMPORT_TIMEOUT_SECONDS`).',
      ),
      ApiHeader({ name: 'Idempotency-Key', required: false, description: 'Single-use, as for uploads.' }),
      ApiBody({ schema: ref('AssetFromUrl') }),
      ok(201, 'Asset', 'Stored: the bytes were new to you.'),
      ok(200, 'Asset', 'Recorded over bytes you already had.'),
      ...errors(...V2_COMMON, 'invalid_request', 'invalid_json', 'hash_mismatch', 'idempotency_key_reuse', 'import_failed', 'payload_too_large', 'storage_limit_exceeded'),
    ),
  list: () =>
    applyDecorators(
      ...endpoint('List your assets', 'Your live uploads and job outputs, newest first, with cursor pagination; each with a fresh signed `url`.'),
      ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', default: 20, maximum: 100 }, description: 'Clamped to 100; zero or less selects the default.' }),
      ApiQuery({ name: 'cursor', required: false, schema: { type: 'string' }, description: '`next_cursor` of the previous page.' }),
      ApiQuery({ name: 'kind', required: false, schema: { type: 'string', enum: ['upload', 'output'] }, description: '`upload`: assets you uploaded; `output`: assets your jobs made. Both when absent.' }),
      ok(200, 'AssetList', 'One page of assets.'),
      ...errors(...V2_COMMON, 'invalid_request'),
    ),
  fromHash: () =>
    applyDecorators(
      ...endpoint('Create an asset from a hash you may already use', 'No bytes are sent.'),
      ApiBody({ schema: ref('AssetFromHash') }),
      ok(201, 'Asset', 'A new asset record.'),
      ok(200, 'Asset', 'An identical record already existed.'),
      ...errors(...V2_COMMON, 'invalid_request', 'invalid_json', 'blob_not_found', 'storage_limit_exceeded'),
    ),
  byHash: () =>
    applyDecorators(
      ...endpoint('Does a blob with this hash exist for me', 'No body either way.'),
      ApiParam({ name: 'hash', description: '`blake3:<hex>` (or the bare hex).', schema: { type: 'string' } }),
      ApiResponse({ status: 200, description: 'Yes.' }),
      ApiResponse({ status: 404, description: 'No (or not usable by you).' }),
      ApiResponse({ status: 401, description: 'Missing or invalid credentials (no body: HEAD).' }),
      ApiResponse({ status: 429, description: 'Rate limited (no body: HEAD).', headers: RETRY_AFTER } as never),
    ),
  get: () => applyDecorators(...endpoint('Read an asset', 'With a fresh signed `url`.'), assetId, ok(200, 'Asset', 'The asset.'), ...errors(...READ)),
  remove: () =>
    applyDecorators(
      ...endpoint('Delete an asset'),
      assetId,
      ApiResponse({ status: 204, description: 'Deleted.' }),
      ...errors(...READ, 'asset_in_use'),
    ),
  content: () =>
    applyDecorators(
      ...endpoint('Download an asset\'s bytes', 'Cloud surfaces redirect to a signed URL: fetch it without your credentials. The self-hosted surface streams the bytes and honours `Range`.'),
      assetId,
      ApiHeader({ name: 'Range', required: false, description: 'Self-hosted surface: one byte range.' }),
      ApiResponse({ status: 302, description: 'Redirect to a signed URL.', headers: { Location: { schema: { type: 'string', format: 'uri' } } } } as never),
      ApiResponse({ status: 200, description: 'The bytes (self-hosted).', content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } } as never),
      ApiResponse({ status: 206, description: 'A byte range (self-hosted).' }),
      ...errors(...READ, 'range_not_satisfiable'),
    ),
};

const uploadId = ApiParam({ name: 'id', description: 'Upload id, the last segment of the `Location` the creation answered.', schema: { type: 'string' } });
const TUS_RESUMABLE = ApiHeader({ name: 'Tus-Resumable', required: true, description: '`1.0.0`.' });
const UPLOAD_ERRORS: ErrorCode[] = [...V2_COMMON, 'invalid_request', 'not_found', 'upload_conflict'];

export const UploadDocs = {
  controller: () => applyDecorators(ApiTags('uploads'), ApiBearerAuth('apiKey')),
  create: () =>
    applyDecorators(
      ...endpoint(
        'Create a resumable upload (tus)',
        'The tus 1.0.0 protocol (creation, creation-with-upload, termination, expiration), for large files such as models (up to `MAX_RESUMABLE_UPLOAD_BYTES`, default 10 GiB). ' +
          '`Upload-Metadata` carries `file_path` (or `filename`), and optionally `content_type`, `expected_hash` (`blake3:<hex>`) and `expires_in`. ' +
          'The last request of an upload answers with the Asset it became (201 here, 200 on a PATCH).',
      ),
      TUS_RESUMABLE,
      ApiHeader({ name: 'Upload-Length', required: true, description: 'The file\'s size in bytes.' }),
      ApiHeader({ name: 'Upload-Metadata', required: true, description: 'Comma-separated `key base64(value)` pairs.' }),
      ApiResponse({ status: 201, description: 'Created (`Location` names the upload); with the Asset as its body when the request carried the whole file.', headers: { Location: { schema: { type: 'string', format: 'uri' } } } } as never),
      ...errors(...UPLOAD_ERRORS, 'hash_mismatch', 'payload_too_large', 'storage_limit_exceeded'),
    ),
  offset: () =>
    applyDecorators(
      ...endpoint('Read a resumable upload\'s offset (tus)', 'How many bytes arrived: resume the upload from `Upload-Offset`.'),
      uploadId,
      TUS_RESUMABLE,
      ApiResponse({ status: 200, description: 'No body; `Upload-Offset` and `Upload-Length`.' }),
      ApiResponse({ status: 404, description: 'No such upload of yours (no body: HEAD).' }),
      ApiResponse({ status: 401, description: 'Missing or invalid credentials (no body: HEAD).' }),
      ApiResponse({ status: 429, description: 'Rate limited (no body: HEAD).', headers: RETRY_AFTER } as never),
    ),
  append: () =>
    applyDecorators(
      ...endpoint('Append to a resumable upload (tus)', '`Content-Type: application/offset+octet-stream`, `Upload-Offset` equal to the current offset. The request that completes the file answers 200 with the Asset.'),
      uploadId,
      TUS_RESUMABLE,
      ApiHeader({ name: 'Upload-Offset', required: true, description: 'Where these bytes start.' }),
      ApiResponse({ status: 204, description: 'Stored; `Upload-Offset` is the new offset.' }),
      ok(200, 'Asset', 'The upload is complete and became this asset.'),
      ...errors(...UPLOAD_ERRORS, 'hash_mismatch', 'payload_too_large', 'storage_limit_exceeded', 'unsupported_media_type'),
    ),
  abandon: () =>
    applyDecorators(
      ...endpoint('Abandon a resumable upload (tus)', 'Its bytes are deleted.'),
      uploadId,
      TUS_RESUMABLE,
      ApiResponse({ status: 204, description: 'Deleted.' }),
      ...errors(...UPLOAD_ERRORS),
    ),
};

export const AccountDocs = {
  controller: () => applyDecorators(ApiTags('account'), ApiBearerAuth('apiKey')),
  get: () =>
    applyDecorators(
      ...endpoint(
        'Read your account',
        'Read-only: the credit balance and the ledger behind it (newest first, cursor paged by `limit` and `cursor`), the tier\'s limits and how much of them is in use now.',
      ),
      ApiQuery({ name: 'limit', required: false, schema: { type: 'integer', default: 20, maximum: 100 }, description: 'Ledger entries in `charges`; clamped to 100, zero or less selects the default.' }),
      ApiQuery({ name: 'cursor', required: false, schema: { type: 'string' }, description: '`charges.next_cursor` of the previous read.' }),
      ok(200, 'Account', 'The account.'),
      ...errors(...V2_COMMON, 'invalid_request'),
    ),
};

export const HealthDocs = {
  controller: () => ApiTags('health'),
  healthz: () => applyDecorators(...endpoint('Alive', 'The process answers, however loaded. For liveness probes.'), ok(200, 'Health', 'Alive.')),
  readyz: () =>
    applyDecorators(
      ...endpoint('Ready', 'PostgreSQL and Redis answer, the blob store takes writes, and the replica is not shedding load. For readiness probes.'),
      ok(200, 'Readiness', 'Ready.'),
      ok(503, 'Readiness', 'Not ready; `checks` says which dependency failed.'),
    ),
};

export const BlobDocs = {
  controller: () => ApiTags('assets'),
  get: () =>
    applyDecorators(
      ...endpoint('Fetch a blob by signed URL (local store)', 'The URLs the local-directory store signs. The signature is the credential; send no API key. `Range` is honoured.'),
      ApiParam({ name: 'hash', description: 'blake3 hex.', schema: { type: 'string', pattern: '^[0-9a-f]{64}$' } }),
      ApiQuery({ name: 'exp', required: true, schema: { type: 'integer' }, description: 'Part of the signed URL.' }),
      ApiQuery({ name: 'name', required: true, schema: { type: 'string' }, description: 'Part of the signed URL (file name).' }),
      ApiQuery({ name: 'ct', required: true, schema: { type: 'string' }, description: 'Part of the signed URL (content type).' }),
      ApiQuery({ name: 'sig', required: true, schema: { type: 'string' }, description: 'Part of the signed URL.' }),
      ApiResponse({ status: 200, description: 'The bytes.', content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } } as never),
      ApiResponse({ status: 206, description: 'A byte range.' }),
      ...errors('forbidden', 'not_found', 'range_not_satisfiable'),
    ),
};
