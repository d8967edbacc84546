import { ERROR_STATUS, ROUTER_BUCKETS } from '#libs/contracts';

// Component schemas of the OpenAPI 3.1 document (JSON Schema 2020-12: nullable is `type: [x, 'null']`).
// They describe what the code sends; the shapes come from libs/contracts/wire.ts and the specs.

type Schema = Record<string, unknown>;

export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
export const nullable = (type: string, extra: Schema = {}): Schema => ({ type: [type, 'null'], ...extra });
export const dateTime = { type: 'string', format: 'date-time' };
const uuid = { type: 'string', format: 'uuid' };

export const ROUTER_ERROR_TYPES = ROUTER_BUCKETS;

const ROUTER_SEGMENT = '^[a-z0-9]+([._-][a-z0-9]+)*$';

/** One page of a v2 list: `has_more` says whether to follow `next_cursor`. */
export const pageOf = (item: string): Schema => ({
  type: 'object',
  required: ['data', 'has_more', 'limit'],
  properties: {
    data: { type: 'array', items: ref(item) },
    has_more: { type: 'boolean' },
    next_cursor: { type: 'string', description: 'Opaque; pass as `cursor` for the next page.' },
    limit: { type: 'integer', minimum: 1, maximum: 100 },
  },
});

const v2: Record<string, Schema> = {
  ErrorCode: {
    type: 'string',
    description:
      'Known values of `error.code`, with the HTTP status each comes with: ' +
      Object.entries(ERROR_STATUS).map(([code, status]) => `\`${code}\` (${status})`).join(', ') +
      '. A 429 is told apart by `error.code` alone; back off for `Retry-After` seconds. Clients should treat an unknown code by its status.',
    enum: Object.keys(ERROR_STATUS),
  },
  ErrorEnvelope: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: { type: 'string', description: 'Machine-readable; see ErrorCode for the known values.', examples: ['not_found'] },
          message: { type: 'string', description: 'Human-readable and safe to show.' },
          details: nullable('object', {
            additionalProperties: true,
            description: 'Free-form. On `invalid_workflow`, `node_errors` maps node ids to lists of `{field, reason}`.',
          }),
        },
      },
    },
  },
  JobStatus: {
    type: 'string',
    enum: ['queued', 'running', 'succeeded', 'canceling', 'canceled', 'failed', 'expired'],
    description: 'Terminal: succeeded, canceled, failed, expired.',
  },
  Progress: {
    type: 'object',
    required: ['value', 'nodes_done', 'nodes_total'],
    description: 'A complete snapshot: one re-syncs a client. Each node weighs 1, a node with steps 1 + steps.',
    properties: {
      value: { type: 'number', format: 'double', minimum: 0, maximum: 1 },
      nodes_done: { type: 'integer' },
      nodes_total: { type: 'integer' },
      current_node: nullable('string'),
      current_node_class: nullable('string'),
      step: nullable('integer'),
      steps: nullable('integer'),
      message: nullable('string'),
    },
  },
  OutputType: { type: 'string', enum: ['image', 'video', 'audio', 'text', 'file', 'latent'] },
  Output: {
    type: 'object',
    required: ['node_id', 'name', 'type', 'content_type', 'size_bytes', 'id', 'hash', 'url', 'url_expires_at'],
    properties: {
      node_id: { type: 'string' },
      name: { type: 'string' },
      type: ref('OutputType'),
      content_type: { type: 'string' },
      size_bytes: { type: 'integer', format: 'int64' },
      id: { ...uuid, description: 'Asset id: GET /api/v2/assets/{id}.' },
      hash: nullable('string', { pattern: '^blake3:[0-9a-f]{64}$' }),
      url: { type: 'string', format: 'uri' },
      url_expires_at: dateTime,
      job_id: nullable('string'),
    },
  },
  JobError: {
    type: 'object',
    required: ['code', 'message'],
    description: 'Why the job failed or expired (an execution outcome, not an HTTP error).',
    properties: {
      code: { type: 'string', examples: ['node_execution_error', 'engine_unavailable', 'execution_timeout', 'missing_asset', 'prompt_rejected'] },
      message: { type: 'string' },
      node_id: nullable('string'),
      class_type: nullable('string'),
      traceback: nullable('string'),
    },
  },
  JobUrls: {
    type: 'object',
    required: ['self', 'events', 'cancel'],
    description: 'Follow-up links, host-relative (leading /) with any mount prefix included: resolve against the request origin. `logs` is absent on surfaces that capture no logs.',
    properties: {
      self: { type: 'string', format: 'uri-reference' },
      events: { type: 'string', format: 'uri-reference' },
      cancel: { type: 'string', format: 'uri-reference' },
      logs: { type: 'string', format: 'uri-reference' },
    },
  },
  Job: {
    type: 'object',
    required: ['id', 'status', 'created_at', 'started_at', 'completed_at', 'expires_at', 'queue_position', 'progress', 'outputs', 'error', 'urls'],
    properties: {
      id: uuid,
      status: ref('JobStatus'),
      created_at: dateTime,
      started_at: nullable('string', { format: 'date-time' }),
      completed_at: nullable('string', { format: 'date-time' }),
      expires_at: { ...dateTime, description: 'Retention deadline: after it the job and its outputs answer 404.' },
      queue_position: nullable('integer', { description: 'Jobs that start before this one (0 = next); null once running.' }),
      progress: { oneOf: [ref('Progress'), { type: 'null' }] },
      outputs: { type: 'array', items: ref('Output') },
      error: { oneOf: [ref('JobError'), { type: 'null' }] },
      metrics: {
        type: 'object',
        description: 'A metric not yet known is null, not omitted.',
        properties: { queue_ms: nullable('integer'), execution_ms: nullable('integer') },
        additionalProperties: nullable('integer'),
      },
      urls: ref('JobUrls'),
      deadline_at: nullable('string', { format: 'date-time', description: 'Additive: the deadline `Cancel-After` set; past it the job ends `expired` (`deadline_exceeded`). Null without one.' }),
    },
  },
  JobList: pageOf('Job'),
  Workflow: {
    type: 'object',
    description: 'The engine API format: node id to `{class_type, inputs, _meta?}`. An input is a literal, a link `[node_id, output_index]`, or an asset reference `{"__type": "core/ASSET", "info": {"id": "<asset uuid>"}}`.',
    additionalProperties: {
      type: 'object',
      required: ['class_type', 'inputs'],
      properties: { class_type: { type: 'string' }, inputs: { type: 'object', additionalProperties: true }, _meta: { type: 'object' } },
    },
  },
  SubmitJobRequest: {
    type: 'object',
    required: ['workflow'],
    additionalProperties: false,
    properties: {
      workflow: ref('Workflow'),
      extra_data: {
        type: ['object', 'null'],
        additionalProperties: false,
        description: 'Partner-node credentials for this run only: passed to the engine, never stored, never echoed, never logged.',
        properties: { api_key_comfy_org: { type: 'string', maxLength: 4096 }, auth_token_comfy_org: { type: 'string', maxLength: 4096 } },
      },
    },
  },
  JobWorkflow: {
    type: 'object',
    required: ['workflow', 'format'],
    properties: { workflow: ref('Workflow'), format: { const: 'api' } },
  },
  JobLog: {
    type: 'object',
    required: ['text', 'truncated', 'captured_at'],
    properties: { text: { type: 'string' }, truncated: { type: 'boolean' }, captured_at: dateTime },
  },
  JobEventStream: {
    type: 'string',
    description: [
      'Server-Sent Events. Each event has an `id:` (resume with `Last-Event-ID`), an `event:` name and JSON `data:`.',
      'On connect: the current `status`, the latest `progress` and `preview`, then live events; the stream ends after a terminal `status`.',
      'Events: `status` {status, queue_position?}; `progress` a Progress; `preview` {node_id, content_type, data_base64};',
      '`output` an Output; `log` {level, message}. A `: keepalive` comment about every 15 s.',
    ].join(' '),
  },
  Asset: {
    type: 'object',
    required: ['id', 'hash', 'size_bytes', 'content_type', 'file_path', 'created_new', 'created_at', 'url', 'url_expires_at', 'expires_at', 'job_id'],
    properties: {
      id: uuid,
      hash: { type: 'string', pattern: '^blake3:[0-9a-f]{64}$', description: 'Computed by the server.' },
      size_bytes: { type: 'integer', format: 'int64' },
      content_type: { type: 'string' },
      file_path: { type: 'string' },
      tags: { type: 'array', items: { type: 'string' } },
      created_new: { type: 'boolean', description: 'True when the bytes were new to your store when this record was made (the upload that first stored them); the same on every read. False for a record made from a hash.' },
      created_at: dateTime,
      url: { type: 'string', format: 'uri', description: 'Signed, expiring download URL; fetch it without credentials.' },
      url_expires_at: dateTime,
      expires_at: nullable('string', { format: 'date-time' }),
      job_id: nullable('string', { description: 'The job that produced it, for outputs.' }),
    },
  },
  AssetList: pageOf('Asset'),
  LedgerEntry: {
    type: 'object',
    required: ['id', 'amount', 'reason', 'ref', 'created_at'],
    properties: {
      id: { type: 'string', description: 'Ledger entry id.' },
      amount: { type: 'integer', format: 'int64', description: 'Credits: negative for a charge, positive for a grant.' },
      reason: { type: 'string', description: '`grant` (credits added by an operator), `job` (a job\'s execution time) or `router_call` (a model router call).' },
      ref: nullable('string', { description: 'What the entry is for: the job id of a `job` charge, the `X-Service-Request-Id` of a router call.' }),
      created_at: dateTime,
    },
  },
  Account: {
    type: 'object',
    required: ['id', 'name', 'tier', 'status', 'credit_balance', 'limits', 'usage', 'router', 'charges'],
    properties: {
      id: uuid,
      name: { type: 'string' },
      tier: { type: 'string', examples: ['free', 'pro', 'enterprise'] },
      status: { type: 'string', enum: ['active', 'inactive'] },
      credit_balance: { type: 'integer', format: 'int64', description: 'Credits; a submission needs a positive balance.' },
      limits: {
        type: 'object',
        required: ['max_concurrent_jobs', 'max_queued_jobs', 'requests_per_minute', 'max_event_streams', 'max_model_bytes'],
        properties: {
          max_concurrent_jobs: { type: 'integer' },
          max_queued_jobs: { type: 'integer' },
          requests_per_minute: { type: 'integer' },
          max_event_streams: { type: 'integer' },
          max_model_bytes: { type: 'integer', format: 'int64', description: 'Bytes your model files (assets under `models/<folder>/`) may take.' },
        },
      },
      usage: {
        type: 'object',
        required: ['running_jobs', 'queued_jobs', 'open_event_streams', 'requests_this_minute', 'model_bytes'],
        properties: {
          running_jobs: { type: 'integer', description: 'Running or canceling now.' },
          queued_jobs: { type: 'integer', description: 'Queued now (counted against `max_queued_jobs`).' },
          open_event_streams: { type: 'integer' },
          requests_this_minute: { type: 'integer', description: 'Requests counted in the current one-minute window, this one included.' },
          model_bytes: { type: 'integer', format: 'int64', description: 'Bytes your model files take now, each blob counted once (against `max_model_bytes`).' },
        },
      },
      router: {
        type: 'object',
        required: ['enabled', 'max_concurrent_calls', 'spend_cap_cents', 'window_calls', 'window_seconds'],
        properties: {
          enabled: { type: 'boolean' },
          max_concurrent_calls: { type: 'integer' },
          spend_cap_cents: { type: 'integer', description: 'Cap on the committed spend of calls in flight, in US cents.' },
          window_calls: { type: 'integer', description: 'Calls allowed per window.' },
          window_seconds: { type: 'integer' },
        },
      },
      charges: { ...pageOf('LedgerEntry'), description: 'The credit ledger, newest first: one page.' },
    },
  },
  AssetUpload: {
    type: 'object',
    required: ['file'],
    properties: {
      file: { type: 'string', contentMediaType: 'application/octet-stream', description: 'The bytes (one file part).' },
      content_type: { type: 'string', description: 'Media type to record; defaults to the part\'s.' },
      file_path: { type: 'string' },
      expected_hash: { type: 'string', pattern: '^blake3:[0-9a-f]{64}$', description: 'When given and different from the computed hash: 409 hash_mismatch, nothing stored.' },
      'tags[]': { type: 'array', items: { type: 'string', minLength: 1, maxLength: 128 } },
      expires_in: { type: 'integer', minimum: 60, maximum: 604800 },
    },
  },
  AssetFromHash: {
    type: 'object',
    required: ['hash'],
    properties: {
      hash: { type: 'string', pattern: '^blake3:[0-9a-f]{64}$' },
      file_path: { type: 'string' },
      tags: { type: 'array', items: { type: 'string' } },
      expires_in: { type: 'integer', minimum: 60, maximum: 604800 },
    },
  },
  AssetFromUrl: {
    type: 'object',
    required: ['url'],
    properties: {
      url: { type: 'string', format: 'uri', description: 'http(s); fetched by the service.' },
      file_path: { type: 'string', description: 'Defaults to the URL\'s last path segment. `models/<folder>/<name>` makes a model file.' },
      content_type: { type: 'string' },
      expected_hash: { type: 'string', pattern: '^blake3:[0-9a-f]{64}$' },
      tags: { type: 'array', items: { type: 'string' } },
      expires_in: { type: 'integer', minimum: 60, maximum: 604800 },
    },
  },
  Health: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } },
  Readiness: {
    type: 'object',
    required: ['status', 'checks'],
    properties: {
      status: { type: 'string', enum: ['ready', 'not_ready'] },
      checks: { type: 'object', description: '`ok` or `error: <reason>` per dependency.', additionalProperties: { type: 'string' }, examples: [{ postgres: 'ok', redis: 'ok', storage: 'ok', load: 'ok' }] },
    },
  },
};

const v1: Record<string, Schema> = {
  V1PromptRequest: {
    type: 'object',
    required: ['prompt'],
    properties: {
      prompt: ref('Workflow'),
      client_id: { type: 'string' },
      prompt_id: { ...uuid, description: 'Optional id for the job; a new one is made when absent.' },
      extra_data: {
        type: 'object',
        description: 'Partner-node key for this run only (`api_key_comfy_org`, the same as the cloud key); never stored or logged.',
        properties: { api_key_comfy_org: { type: 'string' }, auth_token_comfy_org: { type: 'string' } },
      },
      number: { type: 'number', description: 'Accepted and ignored (fair per-account queue).' },
      front: { type: 'boolean', description: 'Accepted and ignored.' },
    },
  },
  V1PromptResponse: {
    type: 'object',
    required: ['prompt_id', 'number', 'node_errors'],
    properties: { prompt_id: uuid, number: { type: 'integer' }, node_errors: { type: 'object' } },
  },
  V1EngineError: {
    type: 'object',
    required: ['error', 'node_errors'],
    description: "The engine's validation failure body.",
    properties: {
      error: {
        type: 'object',
        required: ['type', 'message'],
        properties: {
          type: { type: 'string', examples: ['no_prompt', 'invalid_prompt', 'prompt_no_outputs', 'prompt_outputs_failed_validation', 'invalid_json'] },
          message: { type: 'string' },
          details: { type: 'string' },
          extra_info: { type: 'object' },
        },
      },
      node_errors: {
        type: 'object',
        additionalProperties: {
          type: 'object',
          properties: { class_type: { type: 'string' }, dependent_outputs: { type: 'array', items: { type: 'string' } }, errors: { type: 'array', items: { type: 'object' } } },
        },
      },
    },
  },
  V1Upload: {
    type: 'object',
    required: ['image'],
    properties: {
      image: { type: 'string', contentMediaType: 'application/octet-stream' },
      type: { type: 'string', enum: ['input', 'temp', 'output'] },
      subfolder: { type: 'string', description: 'Accepted and ignored: storage is flat and content-addressed.' },
      overwrite: { type: 'string', enum: ['true', 'false'], description: 'Accepted and ignored.' },
    },
  },
  V1MaskUpload: {
    type: 'object',
    required: ['image', 'original_ref'],
    properties: {
      image: { type: 'string', contentMediaType: 'application/octet-stream', description: 'The mask; its alpha channel is applied to the original.' },
      type: { type: 'string', enum: ['input'] },
      subfolder: { type: 'string', description: 'Accepted and ignored.' },
      original_ref: { type: 'string', description: 'JSON `{filename, subfolder, type}` naming the original image.' },
    },
  },
  V1UploadResponse: {
    type: 'object',
    required: ['name', 'subfolder'],
    properties: { name: { type: 'string' }, subfolder: { type: 'string' }, type: { type: 'string' } },
  },
  V1JobStatus: {
    type: 'object',
    required: ['status'],
    properties: {
      status: {
        type: 'string',
        description: 'Terminal: success, error, non_retryable_error, lost, cancelled. Any other value means in flight.',
        examples: ['submitted', 'queued_waiting', 'preparing', 'executing', 'cancel_requested', 'success', 'error', 'non_retryable_error', 'lost', 'cancelled'],
      },
    },
  },
  V1Queue: {
    type: 'object',
    required: ['queue_running', 'queue_pending'],
    description: 'Items are `[number, prompt_id, prompt, extra_data, outputs_to_execute]` (credentials stripped).',
    properties: { queue_running: { type: 'array', items: { type: 'array' } }, queue_pending: { type: 'array', items: { type: 'array' } } },
  },
  V1QueueInfo: {
    type: 'object',
    properties: { exec_info: { type: 'object', properties: { queue_remaining: { type: 'integer' } } } },
  },
  V1QueueRequest: {
    type: 'object',
    properties: { delete: { type: 'array', items: { type: 'string' } }, clear: { type: 'boolean' } },
  },
  V1InterruptRequest: { type: 'object', properties: { prompt_id: { type: 'string', description: 'Interrupt only this job; all running jobs of the account when absent.' } } },
  V1History: {
    type: 'object',
    description: 'Keyed by prompt id: `{prompt, outputs: {node_id: {images: [{filename, subfolder, type}]}}, status: {status_str, completed, messages}, meta}`. `{}` for an unknown prompt.',
    additionalProperties: { type: 'object' },
  },
  V1ObjectInfo: {
    type: 'object',
    description: 'Node definitions keyed by class name; each has at least `input.required`.',
    additionalProperties: { type: 'object' },
  },
  V1NameList: { type: 'array', items: { type: 'string' } },
  V1Features: {
    type: 'object',
    required: ['supports_preview_metadata', 'max_upload_size'],
    properties: { supports_preview_metadata: { type: 'boolean' }, max_upload_size: { type: 'integer' } },
  },
  V1SystemStats: {
    type: 'object',
    required: ['system', 'devices'],
    properties: { system: { type: 'object' }, devices: { type: 'array', items: { type: 'object' } } },
  },
};

const router: Record<string, Schema> = {
  RouterProviderSegment: { type: 'string', pattern: ROUTER_SEGMENT, maxLength: 64 },
  RouterModelSegment: { type: 'string', pattern: ROUTER_SEGMENT, maxLength: 128 },
  RouterModelId: { type: 'string', pattern: '^[a-z0-9]+([._-][a-z0-9]+)*/[a-z0-9]+([._-][a-z0-9]+)*$', maxLength: 193 },
  RouterPageCursor: { type: 'string', pattern: '^[A-Za-z0-9._~+/=-]+$', minLength: 1, maxLength: 512, description: 'Opaque; only round-trip it.' },
  RouterErrorType: {
    type: 'string',
    enum: [...ROUTER_ERROR_TYPES],
    description: 'Closed set of 15 buckets; treat an unrecognized one as `internal_error`.',
  },
  RouterChargesOnPolicyRejection: { type: 'string', enum: ['yes', 'no', 'unknown'], description: 'Whether a call the model refuses on content-policy grounds is still charged; `unknown` where the provider bills some refusals (of what it generated) and not others (of the input).' },
  RouterModelBilling: {
    type: 'object',
    required: ['charges_on_policy_rejection'],
    properties: { charges_on_policy_rejection: ref('RouterChargesOnPolicyRejection') },
  },
  RouterModelListEntry: {
    type: 'object',
    required: ['id', 'provider', 'model', 'billing'],
    properties: { id: ref('RouterModelId'), provider: ref('RouterProviderSegment'), model: ref('RouterModelSegment'), billing: ref('RouterModelBilling') },
  },
  RouterModelDetail: {
    allOf: [
      ref('RouterModelListEntry'),
      { type: 'object', properties: { input_schema_url: { type: 'string', format: 'uri', pattern: '^https://', maxLength: 2048 } } },
    ],
  },
  RouterModelListResponse: {
    type: 'object',
    required: ['data', 'has_more', 'limit'],
    properties: {
      data: { type: 'array', items: ref('RouterModelListEntry') },
      has_more: { type: 'boolean', description: 'Keep walking while true.' },
      next_cursor: ref('RouterPageCursor'),
      limit: { type: 'integer', minimum: 1, maximum: 100 },
    },
  },
  RouterModelInput: { type: 'object', additionalProperties: true, description: "The partner model's native JSON input, forwarded unchanged." },
  RouterModelOutput: { type: 'object', additionalProperties: true, description: "The partner model's native output, returned unchanged." },
  RouterModelInputSchemaDocument: { type: 'object', description: 'A standalone OpenAPI document for the body the call route accepts.' },
  RouterErrorResponse: {
    type: 'object',
    required: ['detail', 'error_type'],
    properties: { detail: { type: 'string', description: 'Human-readable, safe to show; not for parsing.' }, error_type: ref('RouterErrorType') },
  },
  RouterValidationErrorDetail: {
    type: 'object',
    required: ['loc', 'msg', 'type'],
    properties: {
      loc: { type: 'array', items: {} },
      msg: { type: 'string' },
      type: { type: 'string', description: 'Provider-specific reason, passed through (an open string).' },
      ctx: { type: 'object', additionalProperties: true },
      input: {},
    },
  },
  RouterValidationErrorResponse: {
    type: 'object',
    required: ['detail'],
    properties: { detail: { type: 'array', items: ref('RouterValidationErrorDetail') } },
  },
};

export const COMPONENT_SCHEMAS: Record<string, Schema> = { ...v2, ...v1, ...router };
