import { z } from 'zod';
import { ERROR_STATUS } from '../errors.js';
import { IDEMPOTENCY_KEY } from '../ids.js';
import { isStorableText } from '../text.js';
import { BLAKE3, additive, checkedLater, component, dateTime, int64, pageOf, parsedFromText, uriReference, uuid } from './components.js';

// The v2 surface's shapes (jobs, assets, account), as Comfy's public v2 document names them;
// where this service goes beyond it, the description starts with "Additive:".

export const ErrorCodeSchema = component(
  'ErrorCode',
  z
    .enum(Object.keys(ERROR_STATUS) as [keyof typeof ERROR_STATUS, ...(keyof typeof ERROR_STATUS)[]])
    .describe(
      'Known values of `error.code`, with the HTTP status each comes with: ' +
        Object.entries(ERROR_STATUS).map(([code, status]) => `\`${code}\` (${status})`).join(', ') +
        '. A 429 is told apart by `error.code` alone; back off for `Retry-After` seconds. Clients should treat an unknown code by its status.',
    ),
);

export const ErrorEnvelopeSchema = component(
  'ErrorEnvelope',
  z.object({
    error: z.object({
      code: z.string().meta({ description: 'Machine-readable; see ErrorCode for the known values.', examples: ['not_found'] }),
      message: z.string().describe('Human-readable and safe to show.'),
      details: z
        .record(z.string(), z.unknown())
        .nullable()
        .optional()
        .describe('Free-form. On `invalid_workflow`, `node_errors` maps node ids to lists of `{field, reason}`.'),
    }),
  }),
);

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'canceling', 'canceled', 'failed', 'expired'] as const;
export const JobStatusSchema = component('JobStatus', z.enum(JOB_STATUSES).describe('Terminal: succeeded, canceled, failed, expired.'));
export type JobStatusName = z.infer<typeof JobStatusSchema>;

export const TERMINAL_STATUSES: readonly JobStatusName[] = ['succeeded', 'canceled', 'failed', 'expired'];

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export const ProgressSchema = component(
  'Progress',
  z
    .object({
      value: z.number().min(0).max(1).meta({ format: 'double' }),
      nodes_done: z.int(),
      nodes_total: z.int(),
      current_node: z.string().nullable(),
      current_node_class: z.string().nullable(),
      step: z.int().nullable(),
      steps: z.int().nullable(),
      message: z.string().nullable(),
    })
    .describe('A complete snapshot: one re-syncs a client. Each node weighs 1, a node with steps 1 + steps.'),
);
export type ProgressView = z.infer<typeof ProgressSchema>;

export const OutputTypeSchema = component('OutputType', z.enum(['image', 'video', 'audio', 'text', 'file', 'latent']));

export const OutputSchema = component(
  'Output',
  z.object({
    node_id: z.string(),
    name: z.string(),
    type: OutputTypeSchema,
    content_type: z.string(),
    size_bytes: int64(),
    id: uuid().describe('Asset id: GET /api/v2/assets/{id}.'),
    hash: z.string().regex(BLAKE3).nullable(),
    url: z.url(),
    url_expires_at: dateTime(),
    job_id: z.string().nullable().optional(),
  }),
);
export type OutputView = z.infer<typeof OutputSchema>;

export const JobErrorSchema = component(
  'JobError',
  z
    .looseObject({
      code: z.string().meta({ examples: ['node_execution_error', 'engine_unavailable', 'execution_timeout', 'missing_asset', 'prompt_rejected'] }),
      message: z.string(),
      node_id: z.string().nullable().optional(),
      class_type: z.string().nullable().optional(),
      traceback: z.string().nullable().optional(),
    })
    .describe('Why the job failed or expired (an execution outcome, not an HTTP error). May carry more fields (the engine\'s exception details).'),
);
export type JobErrorView = z.infer<typeof JobErrorSchema>;

export const JobUrlsSchema = component(
  'JobUrls',
  z
    .object({ self: uriReference(), events: uriReference(), cancel: uriReference(), logs: uriReference().optional().describe(additive('the captured log; absent on surfaces that capture no logs.')) })
    .describe('Follow-up links, host-relative (leading /) with any mount prefix included: resolve against the request origin.'),
);
export type JobUrls = z.infer<typeof JobUrlsSchema>;

export const JobSchema = component(
  'Job',
  z.object({
    id: uuid(),
    status: JobStatusSchema,
    created_at: dateTime(),
    started_at: dateTime().nullable(),
    completed_at: dateTime().nullable(),
    expires_at: dateTime().describe('Retention deadline: after it the job and its outputs answer 404.'),
    queue_position: z.int().nullable().describe('Jobs that start before this one (0 = next); null once running.'),
    progress: ProgressSchema.nullable(),
    outputs: z.array(OutputSchema),
    error: JobErrorSchema.nullable(),
    metrics: z
      .object({ queue_ms: z.int().nullable(), execution_ms: z.int().nullable() })
      .catchall(z.int().nullable())
      .describe('A metric not yet known is null, not omitted.'),
    urls: JobUrlsSchema,
    deadline_at: dateTime()
      .nullable()
      .describe(additive('the deadline `Cancel-After` set; past it the job ends `expired` (`deadline_exceeded`). Null without one.')),
  }),
);
export type JobView = z.infer<typeof JobSchema>;

export const JobListSchema = component('JobList', pageOf(JobSchema).describe(additive('listing jobs is not in the public contract.')));

const NodeSchema = z.object({ class_type: z.string(), inputs: z.record(z.string(), z.unknown()), _meta: z.record(z.string(), z.unknown()).optional() });
export const WorkflowSchema = component(
  'Workflow',
  z
    .record(z.string(), NodeSchema)
    .describe(
      'The engine API format: node id to `{class_type, inputs, _meta?}`. An input is a literal, a link `[node_id, output_index]`, or an asset reference `{"__type": "core/ASSET", "info": {"id": "<asset uuid>"}}`.',
    ),
);

/** A workflow as it arrives: any JSON, judged by libs/workflow in the contract's own codes (`workflow_format_ui`, `invalid_workflow`). */
export const submittedWorkflow = () => checkedLater(z.unknown().refine((v) => v !== undefined, { message: 'The body needs a "workflow" in the engine API format.' }), 'Workflow');

const partnerSecret = (key: string) => z.string({ error: `extra_data.${key} must be a string.` }).max(4096, { error: `extra_data.${key} must be a string.` });

export const RESERVED_SUBMIT_FIELDS = ['webhook_url', 'inputs'];

export const SubmitJobRequestSchema = component(
  'SubmitJobRequest',
  z.strictObject(
    {
      workflow: submittedWorkflow(),
      extra_data: z
        .strictObject(
          { api_key_comfy_org: partnerSecret('api_key_comfy_org').optional(), auth_token_comfy_org: partnerSecret('auth_token_comfy_org').optional() },
          {
            error: (i) =>
              i.code === 'unrecognized_keys' ? 'extra_data accepts only api_key_comfy_org, auth_token_comfy_org.' : 'extra_data must be an object.',
          },
        )
        .nullable()
        .optional()
        .describe('Partner-node credentials for this run only: passed to the engine, never stored, never echoed, never logged.'),
    },
    {
      error: (i) => {
        if (i.code !== 'unrecognized_keys') return undefined;
        const key = i.keys[0]!;
        return RESERVED_SUBMIT_FIELDS.includes(key) ? `"${key}" is reserved and not supported yet.` : `Unknown field "${key}".`;
      },
    },
  ),
);
export type SubmitJobRequest = z.infer<typeof SubmitJobRequestSchema>;

export const JobWorkflowSchema = component('JobWorkflow', z.object({ workflow: WorkflowSchema, format: z.literal('api').describe('Always `api`: the engine API format.') }));

export const JobLogSchema = component(
  'JobLog',
  z.object({ text: z.string(), truncated: z.boolean(), captured_at: dateTime() }).describe(additive('job logs are not in the public contract.')),
);

export const JobEventStreamSchema = component(
  'JobEventStream',
  z
    .string()
    .describe(
      [
        'Server-Sent Events. Each event has an `id:` (additive: resume with `Last-Event-ID`), an `event:` name and JSON `data:`.',
        'On connect: the current `status`, the latest `progress` and `preview`, then live events; the stream ends after a terminal `status`.',
        'Events: `status` {status, queue_position?}; `progress` a Progress; `preview` {node_id, content_type, data_base64};',
        '`output` an Output; `log` {level, message}. A `: keepalive` comment about every 15 s.',
      ].join(' '),
    ),
);

export const DEFAULT_PAGE_LIMIT = 20;
export const MAX_PAGE_LIMIT = 100;

const LIMIT_REFUSED = 'limit must be a whole number.';
/**
 * A query string is text on the wire: any whole number, however long, clamped to 100, zero or
 * less the default. The document shows the output (an integer), which is what a client sends.
 */
const PAGE_LIMIT = z
  .string({ error: LIMIT_REFUSED })
  .regex(/^-?\d{1,100}$/, LIMIT_REFUSED)
  .transform((raw) => {
    const n = Number(raw);
    return n <= 0 ? DEFAULT_PAGE_LIMIT : Math.min(n, MAX_PAGE_LIMIT);
  })
  .pipe(z.int())
  .optional()
  .describe(`Clamped to ${MAX_PAGE_LIMIT}; zero or less selects the default (${DEFAULT_PAGE_LIMIT}).`);
const PAGE_CURSOR = z
  .string({ error: 'cursor is not valid; use next_cursor from a previous page.' })
  .optional()
  .describe('`next_cursor` of the previous page.');

/**
 * `limit` and `cursor` of every v2 list. The cursor's signature (per list and account) is checked
 * by the list itself; other parameters are ignored, as before.
 */
export const PageQuerySchema = z.object({ limit: PAGE_LIMIT, cursor: PAGE_CURSOR });

const STATUS_LIST_REFUSED = `status must be a comma-separated list of ${JOB_STATUSES.join(', ')}.`;

export const JobListQuerySchema = PageQuerySchema.extend({
  status: parsedFromText(
    z
      // A repeated parameter (`status=queued&status=running`) reads as one list, as it always has.
      .preprocess(
        (value) => (Array.isArray(value) ? value.join(',') : value),
        z
          .string({ error: STATUS_LIST_REFUSED })
          .transform((text) => text.split(',').map((s) => s.trim()).filter(Boolean))
          .pipe(z.array(z.enum(JOB_STATUSES, { error: STATUS_LIST_REFUSED })).min(1, STATUS_LIST_REFUSED)),
      )
      .optional()
      .describe(`Comma-separated JobStatus values (${JOB_STATUSES.join(', ')}).`),
  ),
});

export const AssetSchema = component(
  'Asset',
  z.object({
    id: uuid(),
    hash: z.string().regex(BLAKE3).describe('Computed by the server.'),
    size_bytes: int64(),
    content_type: z.string(),
    file_path: z.string().optional(),
    tags: z.array(z.string()).optional(),
    created_new: z
      .boolean()
      .optional()
      .describe('True when the bytes were new to your store when this record was made (the upload that first stored them); the same on every read. False for a record made from a hash.'),
    created_at: dateTime(),
    url: z.url().describe('Signed, expiring download URL; fetch it without credentials.'),
    url_expires_at: dateTime(),
    expires_at: dateTime().nullable().optional(),
    job_id: z.string().nullable().optional().describe('The job that produced it, for outputs.'),
  }),
);
export type AssetView = z.infer<typeof AssetSchema>;

export const AssetListSchema = component('AssetList', pageOf(AssetSchema).describe(additive('listing assets is not in the public contract.')));

export const ASSET_KINDS = ['upload', 'output'] as const;

export const AssetListQuerySchema = PageQuerySchema.extend({
  kind: z.enum(ASSET_KINDS, { error: `kind must be one of ${ASSET_KINDS.join(', ')}.` }).optional().describe('`upload`: assets you uploaded; `output`: assets your jobs made. Both when absent.'),
});

const EXPIRES_IN_REFUSED = 'expires_in must be a whole number of seconds from 60 to 604800.';
const EXPIRES_IN = z.int({ error: EXPIRES_IN_REFUSED }).min(60, EXPIRES_IN_REFUSED).max(604800, EXPIRES_IN_REFUSED);

/** Absent when null; the JSON bodies have always read a null field as a missing one. */
const nullAsAbsent = <T extends z.ZodType>(schema: T) => z.preprocess((value) => (value === null ? undefined : value), schema);

/** A JSON body's `expires_in`: a number or its digits; null or "" is no expiry (documented as the integer). */
export const AssetExpiresInSchema =
  z.preprocess((value) => (value === null || value === '' ? undefined : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value), EXPIRES_IN.optional());

export const MAX_ASSET_TAGS = 32;
const TAGS_REFUSED = 'tags must be a list of strings of 1 to 128 characters.';
const TAG = z.string({ error: TAGS_REFUSED }).min(1, TAGS_REFUSED).max(128, TAGS_REFUSED).refine(isStorableText, TAGS_REFUSED);
/** `tags` of an asset: null or absent is none. */
export const AssetTagsSchema = nullAsAbsent(z.array(TAG, { error: TAGS_REFUSED }).max(MAX_ASSET_TAGS, `At most ${MAX_ASSET_TAGS} tags are allowed.`).optional());

/** A hash as the JSON bodies read it: `blake3:` may be left out, hex digits in either case. */
const HASH_REF = /^(?:blake3:)?[0-9a-fA-F]{64}$/;
const hashRef = (name: string) => z.string({ error: `${name} must look like blake3:<64 hex digits>.` }).regex(HASH_REF, `${name} must look like blake3:<64 hex digits>.`);
const text = (name: string) => z.string({ error: `${name} must be a string.` });

const URL_REFUSED = 'url must be an http(s) URL of at most 4096 characters.';

/**
 * The text fields of a multipart upload (the last value of a repeated field; `tags[]` every
 * value). content_type and file_path may be left out: this service defaults them.
 */
export const AssetUploadFieldsSchema = z.object({
  content_type: z.string().optional().describe("Media type to record; this service defaults it to the part's when absent."),
  file_path: z.string().optional().describe("This service defaults it to the part's file name when absent."),
  expected_hash: hashRef('expected_hash').optional().describe('When given and different from the computed hash: 409 hash_mismatch, nothing stored.'),
  'tags[]': AssetTagsSchema.describe('A `tags` field is read as one more `tags[]`.'),
  expires_in: AssetExpiresInSchema,
});

export const AssetUploadSchema = component(
  'AssetUpload',
  z.object({ file: z.string().meta({ contentMediaType: 'application/octet-stream', description: 'The bytes (one file part).' }), ...AssetUploadFieldsSchema.shape }),
);

export const AssetFromHashSchema = component(
  'AssetFromHash',
  z.object({
    hash: hashRef('hash'),
    file_path: text('file_path').optional(),
    content_type: text('content_type').optional().describe("Defaults to the existing record's, or the guess from a new file_path."),
    tags: AssetTagsSchema,
    expires_in: AssetExpiresInSchema,
  }),
);

export const AssetFromUrlSchema = component(
  'AssetFromUrl',
  z
    .object({
      url: z
        .url({ error: (issue) => (issue.code === 'invalid_format' && issue.input !== '' ? 'url must be an absolute http(s) URL.' : URL_REFUSED) })
        .max(4096, URL_REFUSED)
        .describe('http(s); fetched by the service.'),
      file_path: nullAsAbsent(text('file_path').optional()).describe("Defaults to the URL's last path segment. `models/<folder>/<name>` makes a model file."),
      content_type: nullAsAbsent(text('content_type').optional()),
      expected_hash: nullAsAbsent(hashRef('expected_hash').optional()),
      tags: AssetTagsSchema,
      expires_in: AssetExpiresInSchema,
    })
    .describe(additive('importing from a URL is not in the public contract.')),
);

export const LedgerEntrySchema = component(
  'LedgerEntry',
  z.object({
    id: z.string().describe('Ledger entry id.'),
    amount: int64().describe('Credits: negative for a charge, positive for a grant.'),
    reason: z.string().describe("`grant` (credits added by an operator), `job` (a job's execution time) or `router_call` (a model router call)."),
    ref: z.string().nullable().describe('What the entry is for: the job id of a `job` charge, the `X-Service-Request-Id` of a router call.'),
    created_at: dateTime(),
  }),
);

export const AccountSchema = component(
  'Account',
  z
    .object({
      id: uuid(),
      name: z.string(),
      tier: z.string().meta({ examples: ['free', 'pro', 'enterprise'] }),
      status: z.enum(['active', 'inactive']),
      credit_balance: int64().describe('Credits; a submission needs a positive balance.'),
      limits: z.object({
        max_concurrent_jobs: z.int(),
        max_queued_jobs: z.int(),
        requests_per_minute: z.int(),
        max_event_streams: z.int(),
        max_model_bytes: int64().describe('Bytes your model files (assets under `models/<folder>/`) may take.'),
      }),
      usage: z.object({
        running_jobs: z.int().describe('Running or canceling now.'),
        queued_jobs: z.int().describe('Queued now (counted against `max_queued_jobs`).'),
        open_event_streams: z.int(),
        requests_this_minute: z.int().describe('Requests counted in the current one-minute window, this one included.'),
        model_bytes: int64().describe('Bytes your model files take now, each blob counted once (against `max_model_bytes`).'),
      }),
      router: z.object({
        enabled: z.boolean(),
        max_concurrent_calls: z.int(),
        spend_cap_cents: z.int().describe('Cap on the committed spend of calls in flight, in US cents.'),
        window_calls: z.int().describe('Calls allowed per window.'),
        window_seconds: z.int(),
      }),
      charges: pageOf(LedgerEntrySchema).describe('The credit ledger, newest first: one page.'),
    })
    .describe(additive('the account route is not in the public contract.')),
);

export const HealthSchema = component('Health', z.object({ status: z.literal('ok') }));
export const ReadinessSchema = component(
  'Readiness',
  z.object({
    status: z.enum(['ready', 'not_ready']),
    checks: z.record(z.string(), z.string()).meta({ description: '`ok` or `error: <reason>` per dependency.', examples: [{ postgres: 'ok', redis: 'ok', storage: 'ok', load: 'ok' }] }),
  }),
);

// Request headers, each parsed by the schema its operation declares (Node hands a repeated header
// over as a list; each header says how it reads one).

const IDEMPOTENCY_KEY_REFUSED = 'Idempotency-Key must be 1 to 255 visible ASCII characters.';

/** `Idempotency-Key` of v2 writes: the first value of a repeated header. */
export const IdempotencyKeySchema = z
  .preprocess((value) => (Array.isArray(value) ? value[0] : value), z.string({ error: IDEMPOTENCY_KEY_REFUSED }).regex(IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_REFUSED))
  .optional();

const joined = (value: unknown) => (Array.isArray(value) ? value.join(',') : value);

const CANCEL_AFTER_REFUSED = 'Cancel-After must be a duration such as 90s, 5m or 1h30m, or a number of seconds, of at least 1 second.';
// The syntax Replicate's API takes: hours, minutes and seconds in that order, or plain seconds.
const DURATION = /^(?:\d{1,9}|(?:\d{1,6}h)?(?:\d{1,6}m)?(?:\d{1,8}s)?)$/;
const DURATION_PARTS = /^(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,8})s)?$/;

/** `Cancel-After` on a submission: the duration in seconds (the tier's maximum caps it later). */
export const CancelAfterSchema = parsedFromText(
  z
    .preprocess(
      joined,
      z
        .string({ error: CANCEL_AFTER_REFUSED })
        .trim()
        .min(1, CANCEL_AFTER_REFUSED)
        .regex(DURATION, CANCEL_AFTER_REFUSED)
        .transform((text) => {
          if (/^\d+$/.test(text)) return Number(text);
          const [, h, m, s] = DURATION_PARTS.exec(text)!;
          return Number(h ?? 0) * 3600 + Number(m ?? 0) * 60 + Number(s ?? 0);
        })
        .pipe(z.int().min(1, CANCEL_AFTER_REFUSED)),
    )
    .optional(),
);

// RFC 7240: the name in any case, optional spaces around '=', the value bare or quoted. Any number
// of digits: a long wait is capped like any other, not ignored.
const PREFER_WAIT = /(?:^|[,;\s])wait\s*=\s*("?)(\d{1,100})\1(?:$|[,;\s])/i;

/**
 * `Prefer` on a submission: the seconds of `wait=N` (the handler caps them), undefined without
 * one. Other preferences, and a header that is not a wait, are ignored, never refused.
 */
export const PreferWaitSchema = parsedFromText(
  z
    .preprocess(
      joined,
      z
        .string()
        .transform((text) => {
          const wait = PREFER_WAIT.exec(text);
          return wait ? Number(wait[2]) : undefined;
        })
        .pipe(z.number().optional()),
    )
    .optional(),
);

/**
 * `Last-Event-ID` of an event stream: an id the stream sent (`<ms>-<seq>`). Anything else, a
 * repeated header included, reads as no id (the stream starts from its snapshot), never a refusal.
 */
export const LastEventIdSchema = z
  .string()
  .trim()
  .regex(/^\d{1,20}-\d{1,20}$/)
  .optional()
  .catch(undefined);

/**
 * `Range` of a download: one byte range, `bytes=first-last`, `bytes=first-` or `bytes=-suffix`, its
 * numbers null where left out (the content's size settles the rest). Any other form, several
 * ranges included, reads as none, never a refusal: the whole content is served, as RFC 9110 allows.
 */
export const ByteRangeSchema = parsedFromText(
  z
    .string()
    .trim()
    .regex(/^bytes=(?:\d+-\d*|-\d+)$/)
    .transform((text) => {
      const [first, last] = text.slice('bytes='.length).split('-') as [string, string];
      return { first: first === '' ? null : Number(first), last: last === '' ? null : Number(last) };
    })
    .pipe(z.object({ first: z.number().nullable(), last: z.number().nullable() }))
    .optional()
    .catch(undefined),
);
