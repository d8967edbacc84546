import { z } from 'zod';
import {
  V1EngineErrorSchema, V1FeaturesSchema, V1HistoryQuerySchema, V1HistorySchema, V1InterruptRequestSchema, V1LogsSubscribeRequestSchema, V1SettingsSchema, V1JobStatusSchema, V1MaskUploadSchema, V1NameListSchema, V1ObjectInfoSchema,
  V1PromptRequestSchema, V1PromptResponseSchema, V1QueueInfoSchema, V1QueueRequestSchema, V1QueueSchema, V1SystemStatsSchema, V1UploadResponseSchema, V1UploadSchema,
  V1UserDataListQuerySchema, V1UserDataTreeQuerySchema, V1UserDataWriteQuerySchema, V1ViewMetadataQuerySchema, V1ViewQuerySchema, type ErrorCode,
} from '#libs/contracts';
import { BYTES, bytes, envelopeErrors, json, noBody, type Operation, type ResponseSpec } from './operation.js';

// The deprecated engine-compatible v1 REST surface and its WebSocket (apps/api/src/v1). As on the
// engine, every route is also served without `/api`; the document lists the `/api` form.

const V1_ERRORS: ErrorCode[] = ['unauthorized', 'rate_limited', 'inactive_account', 'upstream_error', 'service_unavailable'];
/** Routes over the caller's jobs: on the deployment surface an address without a deployment of the caller is a 404. */
const SCOPED: ErrorCode[] = ['not_found'];
const security = [{ v1ApiKey: [] }];

type Extra = Partial<Pick<Operation, 'description' | 'params' | 'query' | 'body' | 'headers'>>;

function op(method: Operation['method'], path: string, summary: string, responses: Record<number, ResponseSpec>, extra: Extra = {}, codes: ErrorCode[] = []): Operation {
  return { method, path, tag: 'v1', summary, security, ...extra, responses: { ...responses, ...envelopeErrors([...V1_ERRORS, ...codes]) } };
}

const engineError = json(V1EngineErrorSchema, "The engine's validation error body (bad workflow, missing fields, invalid JSON).");
const jsonBody = (schema: z.ZodType, required = true) => ({ body: { content: { 'application/json': schema }, required } });
const multipart = (schema: z.ZodType) => ({ body: { content: { 'multipart/form-data': schema }, required: true } });
const path1 = (name: string, description: string) => z.object({ [name]: z.string().describe(description) });
const empty = noBody('Done (no body).');
const anyJson = (required = true) => jsonBody(z.unknown(), required);
const text = (description: string): ResponseSpec => ({ description, content: { 'text/plain': z.string() } });
const ERROR_TEXT = z.object({ error: z.string() });
const FULL_INFO = z.record(z.string(), z.unknown());
const MODEL_FOLDER = z.object({ name: z.string(), folders: z.array(z.string()) });
const MODEL_FILE = z.object({ name: z.string(), pathIndex: z.int() });
const USER_FILE = z.string().describe('Path in the user folder, percent-encoded as one segment (`workflows%2Fname.json`).');
const USERDATA_REFUSALS = {
  400: text('No file name, or a name no file can have.'),
  403: text('The name leaves the user folder, or names a folder where a file is needed.'),
  404: text('`File not found`.'),
};

const REST: Operation[] = [
  op('get', '/api/object_info', 'Node definitions', { 200: json(V1ObjectInfoSchema, 'Every node class the engines offer, with your uploaded files as choices.') }),
  op('get', '/api/object_info/{cls}', 'One node definition', { 200: json(V1ObjectInfoSchema, 'The class, or `{}` when unknown.') }, { params: path1('cls', 'Node class name.') }),
  op('get', '/api/embeddings', 'Embedding names', { 200: json(V1NameListSchema, 'As the engines last reported them.') }),
  op('get', '/api/extensions', 'Front-end extension scripts', { 200: json(V1NameListSchema, 'Always empty: the service serves no front end.') }),
  op('get', '/api/models', 'Model folders', { 200: json(V1NameListSchema, 'As the engines last reported them.') }),
  op('get', '/api/models/{folder}', 'Files in a model folder', { 200: json(V1NameListSchema, 'As the engines last reported them.') }, { params: path1('folder', 'Model folder name.') }, ['not_found']),
  op('get', '/api/experiment/models', 'Model folders for the model library', { 200: json(z.array(MODEL_FOLDER), '`[{name, folders}]`; `folders` (paths on disk) is always empty.') }),
  op('get', '/api/experiment/models/{folder}', 'Files in a model folder, for the model library', { 200: json(z.array(MODEL_FILE), '`[{name, pathIndex}]`.') }, { params: path1('folder', 'Model folder name.') }, [
    'not_found',
  ]),
  op(
    'get',
    '/api/view_metadata/{folder}',
    "A safetensors model's metadata",
    { 200: json(z.record(z.string(), z.unknown()), 'The `__metadata__` of the header of one of your own safetensors model files.') },
    {
      description: 'For your own model files (assets under `models/<folder>/`); a model with no known metadata answers 404, as the engine does.',
      params: path1('folder', 'Model folder name.'),
      query: V1ViewMetadataQuerySchema,
    },
    ['not_found'],
  ),
  op('get', '/api/i18n', "Custom nodes' translations", { 200: json(z.record(z.string(), z.unknown()), 'Always `{}`: the engines report none.') }),
  op('get', '/api/workflow_templates', "Custom nodes' example workflows", { 200: json(z.record(z.string(), z.array(z.string())), 'Node pack → workflow names; always `{}`: the engines report none.') }),
  op(
    'get',
    '/templates/{file}',
    'Workflow template files',
    {
      200: {
        description: "`index.json` (the template dialog's index), `default.json` (the stock text-to-image graph in the front end's format), `default-1.png` (its picture).",
        content: { 'application/json': z.unknown(), 'image/png': BYTES },
      },
      404: text('Any other file: `404: Not Found`.'),
    },
    { params: path1('file', 'File name.') },
  ),
  op('get', '/api/users', 'The user', {
    200: json(z.object({ storage: z.string(), migrated: z.boolean() }), "`{storage: \"server\", migrated}`: the engine's single-user answer; the account is the one user. `migrated` once the user folder holds a file."),
  }),
  op('post', '/api/users', 'Add a user', { 400: json(ERROR_TEXT, '`{error}`: users are accounts here, made by operators.') }, anyJson(false)),
  op('get', '/api/settings', 'All settings', { 200: json(V1SettingsSchema, 'From `comfy.settings.json` in the user folder.') }),
  op(
    'post',
    '/api/settings',
    'Merge settings',
    { 200: empty, 400: { description: engineError.description, content: { 'application/json': z.union([V1EngineErrorSchema, ERROR_TEXT]) } }, 413: text('The settings file would pass a `USERDATA_*` limit.') },
    { description: "The posted object's keys replace those settings; others stay.", ...jsonBody(V1SettingsSchema) },
  ),
  op('get', '/api/settings/{id}', 'One setting', { 200: json(z.unknown(), 'Its value, or `null` when unset.') }, { params: path1('id', 'Setting id.') }),
  op(
    'post',
    '/api/settings/{id}',
    'Set one setting',
    { 200: empty, 400: { description: engineError.description, content: { 'application/json': z.union([V1EngineErrorSchema, ERROR_TEXT]) } }, 413: text('The settings file would pass a `USERDATA_*` limit.') },
    { params: path1('id', 'Setting id.'), ...anyJson() },
  ),
  op(
    'get',
    '/api/userdata',
    'List a folder of the user folder',
    {
      200: json(z.array(z.unknown()), 'Paths relative to `dir`; `[path, ...segments]` with `split`; `{path, size, modified, created}` with `full_info`. Hidden names are skipped.'),
      400: text('`Directory not provided`.'),
      403: text('`Invalid directory`: `dir` leaves the user folder.'),
      404: text('`Directory not found`.'),
    },
    { query: V1UserDataListQuerySchema },
  ),
  op(
    'get',
    '/api/v2/userdata',
    'List files and folders of the user folder',
    {
      200: json(
        z.array(z.looseObject({ name: z.string(), path: z.string(), type: z.enum(['directory', 'file']) })),
        '`[{name, path, type: "directory"|"file", size?, modified?}]`, folders first, by name.',
      ),
      400: text('`Invalid path requested` or `Requested path is not a directory`.'),
      404: text('`Requested path not found`.'),
    },
    { query: V1UserDataTreeQuerySchema },
  ),
  op(
    'get',
    '/api/userdata/{file}',
    'Read a file of the user folder',
    {
      200: { description: "The bytes as stored, typed by the file's extension (else as sent): JSON for a `.json` file.", content: { 'application/json': z.unknown(), 'application/octet-stream': BYTES } },
      304: noBody('Unchanged (`If-None-Match`, `If-Modified-Since`).'),
      ...USERDATA_REFUSALS,
    },
    { params: z.object({ file: USER_FILE }) },
  ),
  op(
    'post',
    '/api/userdata/{file}',
    'Write a file of the user folder',
    {
      200: json(z.union([z.string(), FULL_INFO]), 'The path written, or `{path, size, modified, created}` with `full_info`.'),
      409: text('`File already exists` (`overwrite=false`).'),
      413: text('Past `USERDATA_MAX_FILE_BYTES`, `USERDATA_MAX_ACCOUNT_BYTES` or `USERDATA_MAX_FILES`.'),
      ...USERDATA_REFUSALS,
    },
    {
      description: 'The body is stored byte for byte, whatever its declared type.',
      params: z.object({ file: USER_FILE }),
      query: V1UserDataWriteQuerySchema,
      body: { content: { '*/*': BYTES }, required: false },
    },
  ),
  op('delete', '/api/userdata/{file}', 'Delete a file of the user folder', { 204: noBody('Deleted.'), ...USERDATA_REFUSALS }, { params: z.object({ file: USER_FILE }) }),
  op(
    'post',
    '/api/userdata/{file}/move/{dest}',
    'Move a file of the user folder',
    { 200: json(z.union([z.string(), FULL_INFO]), 'The new path, or `{path, size, modified, created}` with `full_info`.'), 409: text('The destination exists and `overwrite=false`.'), ...USERDATA_REFUSALS },
    {
      description: 'Onto a folder, the file moves into it.',
      params: z.object({ file: USER_FILE, dest: z.string().describe('Destination, percent-encoded like `file`.') }),
      query: V1UserDataWriteQuerySchema,
    },
  ),
  op('get', '/api/internal/logs', "Your jobs' log as one text", { 200: json(z.string(), "Every entry as `\"{t} - {m}\"`, joined: the last 300 lines your jobs wrote, never the engine's own log.") }, {}, SCOPED),
  op('get', '/api/internal/logs/raw', "Your jobs' log entries", {
    200: json(
      z.object({ entries: z.array(z.record(z.string(), z.unknown())), size: z.record(z.string(), z.unknown()) }),
      '`{entries: [{t, m}], size: {cols, rows}}`: the last 300 lines your jobs wrote.',
    ),
  }, {}, SCOPED),
  op('patch', '/api/internal/logs/subscribe', "Have your jobs' log lines pushed", { 200: empty, 400: engineError }, {
    description: "That client id's sockets get a `logs` message with each of your jobs' lines as it ends.",
    ...jsonBody(V1LogsSubscribeRequestSchema),
  }),
  op('get', '/api/internal/folder_paths', 'Model folders on disk', { 200: json(z.record(z.string(), z.array(z.string())), 'Folder → paths; every list is empty (engine paths are not shown).') }),
  op(
    'get',
    '/api/internal/files/{directory_type}',
    'Files directly in a folder',
    { 200: json(V1NameListSchema, "`input`: your uploads, newest first; `output`, `temp`: none (outputs lie in their prompt's subfolder)."), 400: json(ERROR_TEXT, '`{error: "Invalid directory type"}`.') },
    { params: path1('directory_type', '`input`, `output` or `temp`.') },
  ),
  op('get', '/api/features', 'Server features', { 200: json(V1FeaturesSchema, 'What clients read when they connect.') }),
  op('get', '/api/system_stats', 'System stats', { 200: json(V1SystemStatsSchema, 'The shape clients read; the engines are behind the service.') }),
  op('post', '/api/upload/image', 'Upload an input image', { 200: json(V1UploadResponseSchema, 'Stored under a content-addressed name.') }, multipart(V1UploadSchema), [
    'invalid_request',
    'payload_too_large',
    'unsupported_media_type',
  ]),
  op('post', '/api/upload/mask', 'Upload a mask for an uploaded image', { 200: json(V1UploadResponseSchema, 'The original with the mask applied, as a new file.') }, multipart(V1MaskUploadSchema), [
    'invalid_request',
    'not_found',
    'payload_too_large',
    'unsupported_media_type',
  ]),
  op(
    'post',
    '/api/prompt',
    'Submit a workflow',
    { 200: json(V1PromptResponseSchema, 'Queued; `prompt_id` is the job id (v2 sees the same job).'), 400: engineError },
    { description: 'Partner nodes need the key in `extra_data.api_key_comfy_org`.', ...jsonBody(V1PromptRequestSchema) },
    ['insufficient_credits', 'deployment_stopped', 'deployment_not_ready', ...SCOPED],
  ),
  op('get', '/api/prompt', 'Queue summary', { 200: json(V1QueueInfoSchema, 'How many of your jobs are in flight.') }, {}, SCOPED),
  op('get', '/api/job/{id}/status', 'Job status', { 200: json(V1JobStatusSchema, 'Poll until a terminal value.') }, { params: path1('id', 'The prompt id.') }, ['not_found']),
  op('get', '/api/queue', 'Your running and pending jobs', { 200: json(V1QueueSchema, 'Running and pending jobs.') }, {}, SCOPED),
  op('post', '/api/queue', 'Cancel jobs', { 200: empty, 400: engineError }, {
    description: '`{delete: [prompt_id, ...]}` cancels those jobs; `{clear: true}` every pending one.',
    ...jsonBody(V1QueueRequestSchema, false),
  }, SCOPED),
  op('post', '/api/free', 'Free engine memory', { 200: empty }, { description: "Accepted for the engine's clients; the engines are shared between accounts, so it changes nothing." }),
  op('post', '/api/interrupt', 'Interrupt running jobs', { 200: empty, 400: engineError }, jsonBody(V1InterruptRequestSchema, false), SCOPED),
  op('get', '/api/history', 'Finished jobs', { 200: json(V1HistorySchema, 'Oldest first.') }, { query: V1HistoryQuerySchema }, ['invalid_request', ...SCOPED]),
  op('post', '/api/history', 'Clear or prune the history', { 200: empty, 400: engineError }, {
    description: '`{clear: true}` empties your history, `{delete: [prompt_id, ...]}` takes those prompts out of it. The jobs stay: v2 still lists them and their outputs.',
    ...jsonBody(V1QueueRequestSchema, false),
  }, SCOPED),
  op('get', '/api/history/{id}', 'One finished job', { 200: json(V1HistorySchema, 'The job, or `{}` when unknown or unfinished.') }, { params: path1('id', 'The prompt id.') }, SCOPED),
  op(
    'get',
    '/api/view',
    'Download an output or upload',
    {
      302: noBody('Redirect to a signed URL. Do not follow it automatically with your key: read `Location` and fetch it with no credentials.', { Location: { schema: z.string(), required: true } }),
      200: bytes('The bytes (self-hosted surface).'),
    },
    { query: V1ViewQuerySchema },
    ['invalid_request', 'forbidden', 'not_found'],
  ),
];

const websocket = (path: string, summary: string): Operation => ({
  method: 'get',
  path,
  tag: 'v1',
  summary,
  description:
    'WebSocket upgrade. Text frames `{type, data}` as the engine sends them (`status`, `execution_start`, `executing`, `progress`, `progress_state`, `executed`, ' +
    '`execution_cached`, `execution_success`, `execution_error`, `execution_interrupted`, `notification`), filtered to your account (on a deployment API, to the jobs of that deployment); binary preview frames ' +
    '(type 1, or 4 with metadata once `supports_preview_metadata` is declared in a `feature_flags` message). The key is checked before the upgrade.',
  security: [{ v1Token: [] }, { v1ApiKey: [] }] as Record<string, string[]>[],
  query: z.object({ clientId: z.string().optional().describe('Any unique value (currently ignored).'), token: z.string().optional().describe('Your API key.') }),
  responses: { 101: noBody('Switching protocols: the socket is open.'), ...envelopeErrors(['unauthorized', 'too_many_streams', 'rate_limited']) },
  extra: { 'x-websocket': true },
});

export const V1_OPERATIONS: Operation[] = [...REST, websocket('/ws', 'Live execution messages (WebSocket)'), websocket('/api/ws', 'Live execution messages (WebSocket, alias)')];
