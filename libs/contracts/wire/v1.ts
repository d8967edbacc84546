import { z } from 'zod';
import { isStorableText } from '../text.js';
import { checkedLater, component, parsedFromText, uuid } from './components.js';

// The engine-compatible v1 surface's shapes, as the engine (ComfyUI's server.py) sends and takes them.

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_SECRET = 4096;
export const MAX_PNGINFO_BYTES = 1024 * 1024;

const secret = z.string().max(MAX_SECRET).nullable().optional();

export const V1PromptRequestSchema = component(
  'V1PromptRequest',
  z.looseObject({
    prompt: checkedLater(z.unknown().refine((v) => v !== undefined && v !== null), 'Workflow'),
    prompt_id: z.string().regex(UUID_TEXT).nullable().optional().describe('Optional id for the job; a new one is made when absent.'),
    client_id: z.string().max(256).refine(isStorableText).nullable().optional(),
    extra_data: z
      .looseObject({
        api_key_service_org: secret,
        api_key_comfy_org: secret,
        auth_token_comfy_org: secret,
        extra_pnginfo: z
          .record(z.string(), z.unknown())
          .refine((v) => JSON.stringify(v).length <= MAX_PNGINFO_BYTES)
          .nullable()
          .optional(),
      })
      .nullable()
      .optional()
      .describe('Partner-node key for this run only (`api_key_comfy_org`, the same as the cloud key); never stored or logged.'),
    number: z.unknown().optional().describe('Accepted and ignored (fair per-account queue).'),
    front: z.unknown().optional().describe('Accepted and ignored.'),
  }),
);
export type V1PromptRequest = z.infer<typeof V1PromptRequestSchema>;

export const V1PromptResponseSchema = component('V1PromptResponse', z.object({ prompt_id: uuid(), number: z.int(), node_errors: z.record(z.string(), z.unknown()) }));

export const V1EngineErrorSchema = component(
  'V1EngineError',
  z
    .object({
      error: z.object({
        type: z.string().meta({ examples: ['no_prompt', 'invalid_prompt', 'prompt_no_outputs', 'prompt_outputs_failed_validation', 'invalid_json'] }),
        message: z.string(),
        details: z.string().optional(),
        extra_info: z.record(z.string(), z.unknown()).optional(),
      }),
      node_errors: z.record(
        z.string(),
        z.looseObject({ class_type: z.string().optional(), dependent_outputs: z.array(z.string()).optional(), errors: z.array(z.record(z.string(), z.unknown())).optional() }),
      ),
    })
    .describe("The engine's validation failure body."),
);

/** The engine's three folders: any other type fails there. */
const V1_FOLDER_TYPES = ['input', 'output', 'temp'] as const;

const FOLDER_TYPE_REFUSED = 'type must be input, output or temp.';

/** An upload's `type`: an empty one reads as absent, so the upload lands in `input`. */
const UPLOAD_TYPE = z.preprocess(
  (value) => (value === '' ? undefined : value),
  z.enum(V1_FOLDER_TYPES, { error: FOLDER_TYPE_REFUSED }).optional(),
);

/** The text fields of `POST /api/upload/image` (the last value of a repeated field). */
export const V1UploadFieldsSchema = z.object({
  type: UPLOAD_TYPE,
  subfolder: z.string().optional().describe('Accepted and ignored: storage is flat and content-addressed.'),
  overwrite: z.string().optional().describe('Accepted and ignored (the engine overwrites for `true` or `1`).'),
});

export const V1UploadSchema = component(
  'V1Upload',
  z.object({ image: z.string().meta({ contentMediaType: 'application/octet-stream' }), ...V1UploadFieldsSchema.shape }),
);

const REF_NOT_JSON = 'original_ref must be JSON {filename, subfolder, type} naming the original image.';
const REF_NO_NAME = 'original_ref must name the original image: {filename, subfolder, type}.';

/** The text fields of `POST /api/upload/mask`; `original_ref` is read from its JSON text (documented as that text). */
export const V1MaskUploadFieldsSchema = z.object({
  type: UPLOAD_TYPE,
  subfolder: z.string().optional().describe('Accepted and ignored.'),
  original_ref: parsedFromText(
    z
      .string({ error: REF_NOT_JSON })
      .transform((text, ctx) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: REF_NOT_JSON });
          return z.NEVER;
        }
      })
      .pipe(
        z.object(
          {
            filename: z.string({ error: REF_NO_NAME }).min(1, REF_NO_NAME),
            // As before: a subfolder or type that is not text is the default, not a refusal.
            subfolder: z.string().catch(''),
            type: z.string().catch('input'),
          },
          { error: REF_NO_NAME },
        ),
      )
      .describe('JSON `{filename, subfolder, type}` naming the original image.'),
  ),
});

export const V1MaskUploadSchema = component(
  'V1MaskUpload',
  z.object({
    image: z.string().meta({ contentMediaType: 'application/octet-stream', description: 'The mask; its alpha channel is applied to the original.' }),
    ...V1MaskUploadFieldsSchema.shape,
  }),
);

export const V1UploadResponseSchema = component('V1UploadResponse', z.object({ name: z.string(), subfolder: z.string(), type: z.string().optional() }));

export const V1JobStatusSchema = component(
  'V1JobStatus',
  z.object({
    status: z.string().meta({
      description: 'Terminal: success, error, non_retryable_error, lost, cancelled. Any other value means in flight.',
      examples: ['submitted', 'queued_waiting', 'preparing', 'executing', 'cancel_requested', 'success', 'error', 'non_retryable_error', 'lost', 'cancelled'],
    }),
  }),
);

export const V1QueueSchema = component(
  'V1Queue',
  z
    .object({ queue_running: z.array(z.array(z.unknown())), queue_pending: z.array(z.array(z.unknown())) })
    .describe('Items are `[number, prompt_id, prompt, extra_data, outputs_to_execute]` (credentials stripped).'),
);

export const V1QueueInfoSchema = component('V1QueueInfo', z.object({ exec_info: z.object({ queue_remaining: z.int() }) }));

// As the engine reads these edits: only `clear: true` clears (anything else there is ignored).
export const V1QueueRequestSchema = component('V1QueueRequest', z.looseObject({ delete: z.array(z.string()).optional(), clear: z.boolean().optional().catch(undefined) }));

export const V1InterruptRequestSchema = component(
  'V1InterruptRequest',
  z.looseObject({
    // A prompt_id that is not even text names no job, so it interrupts nothing (never everything):
    // it reads as the empty id, which no job has.
    prompt_id: z
      .preprocess((value) => (value === undefined || value === null || typeof value === 'string' ? value : ''), z.string().nullable().optional())
      .describe('Interrupt only this job; all running jobs of the account when absent.'),
  }),
);

export const V1_SUBSCRIBE_REFUSED = 'The body must be {"clientId": string, "enabled": boolean}';

export const V1LogsSubscribeRequestSchema = component(
  'V1LogsSubscribeRequest',
  z.looseObject({
    clientId: z.string({ error: V1_SUBSCRIBE_REFUSED }).min(1, V1_SUBSCRIBE_REFUSED).max(128, V1_SUBSCRIBE_REFUSED).describe('The client id of your sockets (`/ws?clientId=`).'),
    // Read for its truth, as the engine reads it; only a missing one is refused.
    enabled: z
      .unknown()
      .refine((value) => value !== undefined, V1_SUBSCRIBE_REFUSED)
      .transform(Boolean)
      .pipe(z.boolean())
      .describe('Any true value turns pushing on.'),
  }),
);

export const V1SettingsSchema = component('V1Settings', z.record(z.string(), z.unknown()).describe('Setting id → value.'));

export const V1HistorySchema = component(
  'V1History',
  z
    .record(z.string(), z.record(z.string(), z.unknown()))
    .describe(
      'Keyed by prompt id: `{prompt, outputs: {node_id: {images: [{filename, subfolder, type}]}}, status: {status_str, completed, messages}, meta}`. `{}` for an unknown prompt.',
    ),
);

export const V1ObjectInfoSchema = component(
  'V1ObjectInfo',
  z.record(z.string(), z.record(z.string(), z.unknown())).describe('Node definitions keyed by class name; each has at least `input.required`.'),
);

export const V1NameListSchema = component('V1NameList', z.array(z.string()));

export const V1FeaturesSchema = component('V1Features', z.looseObject({ supports_preview_metadata: z.boolean(), max_upload_size: z.int() }));

export const V1SystemStatsSchema = component('V1SystemStats', z.looseObject({ system: z.record(z.string(), z.unknown()), devices: z.array(z.record(z.string(), z.unknown())) }));

// Query parameters as the engine (aiohttp) reads them: `query.get(name)` is the first of repeated
// values, and a parameter is text or absent.
const firstText = (value: unknown): string | undefined => {
  const first = Array.isArray(value) ? (value as unknown[])[0] : value;
  return typeof first === 'string' ? first : undefined;
};
const engineParam = <T extends z.ZodType>(schema: T) => z.preprocess(firstText, schema);

/** The engine's `int(text)`: optional sign, ASCII digits with single underscores between them, spaces around. */
const PYTHON_INT = /^\s*[+-]?\d+(?:_\d+)*\s*$/;

/**
 * An integer parameter the engine reads with `int()`: anything else fails there, so it is refused
 * here (400 `invalid_request`). `clamp` keeps what the handler can serve; the document shows the integer.
 */
function engineInt(name: string, clamp: (n: number) => number) {
  const refused = `${name} must be an integer.`;
  return engineParam(
    z
      .string({ error: refused })
      .regex(PYTHON_INT, refused)
      .transform((text) => clamp(Number(text.replace(/[\s_]/g, ''))))
      .pipe(z.int())
      .optional(),
  );
}

export const V1_HISTORY_DEFAULT_ITEMS = 200;
export const V1_HISTORY_MAX_ITEMS = 1000;
const V1_HISTORY_MAX_OFFSET = 1_000_000;

/** `GET /api/history`: `max_items` below zero is none (the engine answers nothing), `offset` below zero the newest page. */
export const V1HistoryQuerySchema = z.object({
  max_items: engineInt('max_items', (n) => (n < 0 ? 0 : Math.min(n, V1_HISTORY_MAX_ITEMS))).describe(
    `At most this many (default ${V1_HISTORY_DEFAULT_ITEMS}, at most ${V1_HISTORY_MAX_ITEMS}; below zero, none).`,
  ),
  offset: engineInt('offset', (n) => (n < 0 ? -1 : Math.min(n, V1_HISTORY_MAX_OFFSET))).describe(
    'Skip this many of the oldest; without it (or below zero), the newest `max_items`.',
  ),
});

const FILENAME_REQUIRED = 'filename is required.';

/**
 * `GET /api/view`. An empty `type` is `output`, as the engine reads it; whether `filename` or
 * `subfolder` climbs out of its folder is judged by the handler (400 and 403, as the engine answers).
 */
export const V1ViewQuerySchema = z.object({
  filename: engineParam(z.string({ error: FILENAME_REQUIRED }).min(1, FILENAME_REQUIRED).max(1024, 'filename must be at most 1024 characters.')).describe('File name.'),
  subfolder: engineParam(z.string().max(1024, 'subfolder must be at most 1024 characters.').optional()).describe('As the output reported it.'),
  type: z
    .preprocess(
      (value) => firstText(value) || undefined,
      z.enum(V1_FOLDER_TYPES, { error: FOLDER_TYPE_REFUSED }).optional(),
    )
    .describe('`output` (the default), `input` or `temp`.'),
});

/**
 * `?flag=` as the engine reads it: true only for "true", in any case (documented as the text
 * sent). Absent, it is undefined: the handler's default.
 */
const engineFlag = (description: string) =>
  parsedFromText(
    engineParam(z.string().optional())
      .transform((text) => text?.toLowerCase() === 'true')
      .pipe(z.boolean())
      .optional()
      .describe(description),
  );
/** `?overwrite=`: anything but exactly "false" overwrites (absent: undefined, which overwrites too). */
const OVERWRITE = parsedFromText(
  engineParam(z.string().optional())
    .transform((text) => text !== 'false')
    .pipe(z.boolean())
    .optional()
    .describe('Anything but `false` overwrites.'),
);

const DIRECTORY_NOT_PROVIDED = 'Directory not provided';

/** `GET /api/userdata`: a missing or empty `dir` is the engine's 400 `Directory not provided`. */
export const V1UserDataListQuerySchema = z.object({
  dir: engineParam(z.string({ error: DIRECTORY_NOT_PROVIDED }).min(1, DIRECTORY_NOT_PROVIDED)).describe('Folder, relative to the user folder (`.` for itself).'),
  recurse: engineFlag('`true`: files at any depth.'),
  split: engineFlag('`true`: each path with its segments.'),
  full_info: engineFlag('`true`: size and times.'),
});

/** `GET /api/v2/userdata`. */
export const V1UserDataTreeQuerySchema = z.object({
  path: engineParam(z.string().optional()).describe('Folder, relative to the user folder; empty for the user folder.'),
});

/** `POST /api/userdata/{file}` and `.../move/{dest}`. */
export const V1UserDataWriteQuerySchema = z.object({
  overwrite: OVERWRITE,
  full_info: engineFlag('`true`: answer with size and times.'),
});

const NO_SAFETENSORS = 'The safetensors model was not found.';

/** `GET /api/view_metadata/{folder}`: the engine answers 404 without a `.safetensors` file name. */
export const V1ViewMetadataQuerySchema = z.object({
  filename: engineParam(z.string({ error: NO_SAFETENSORS }).regex(/\.safetensors$/, NO_SAFETENSORS)).describe('A `.safetensors` model file name.'),
});
