import type { ErrorCode } from '#libs/contracts';
import { envelopeResponses, json } from './responses.js';

// The deprecated v1 REST surface (apps/api/src/v1), described by hand: its controllers belong to
// another part of the code base and carry no Swagger decorators. A test checks this table against
// the routes the api actually serves, in both directions.

type Obj = Record<string, unknown>;

const V1_ERRORS: ErrorCode[] = ['unauthorized', 'rate_limited', 'inactive_account', 'upstream_error', 'service_unavailable'];
const security = [{ v1ApiKey: [] }];

function op(summary: string, responses: Obj, extra: Obj = {}, codes: ErrorCode[] = []): Obj {
  return { tags: ['v1'], summary, security, ...extra, responses: { ...responses, ...envelopeResponses([...V1_ERRORS, ...codes]) } };
}

const engineError = json('V1EngineError', "The engine's validation error body (bad workflow, missing fields, invalid JSON).");
const jsonBody = (schema: string, required = true) => ({ requestBody: { required, content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } } } });
const multipart = (schema: string) => ({ requestBody: { required: true, content: { 'multipart/form-data': { schema: { $ref: `#/components/schemas/${schema}` } } } } });
const pathParam = (name: string, description: string) => ({ name, in: 'path', required: true, description, schema: { type: 'string' } });
const query = (name: string, description: string, schema: Obj = { type: 'string' }, required = false) => ({ name, in: 'query', required, description, schema });
const empty = { description: 'Done (no body).' };
const anyJsonBody = (required = true) => ({ requestBody: { required, content: { 'application/json': { schema: {} } } } });
const inline = (description: string, schema: Obj) => ({ description, content: { 'application/json': { schema } } });
const engineText = (description: string) => ({ description, content: { 'text/plain': { schema: { type: 'string' } } } });
const ERROR_TEXT = { type: 'object', properties: { error: { type: 'string' } } };
const MODEL_FOLDER = { type: 'object', properties: { name: { type: 'string' }, folders: { type: 'array', items: { type: 'string' } } } };
const MODEL_FILE = { type: 'object', properties: { name: { type: 'string' }, pathIndex: { type: 'integer' } } };
const USER_FILE = pathParam('file', 'Path in the user folder, percent-encoded as one segment (`workflows%2Fname.json`).');
const USERDATA_REFUSALS = {
  400: engineText('No file name, or a name no file can have.'),
  403: engineText('The name leaves the user folder, or names a folder where a file is needed.'),
  404: engineText('`File not found`.'),
};

export const V1_PATHS: Record<string, Obj> = {
  '/api/object_info': { get: op('Node definitions', { 200: json('V1ObjectInfo', 'Every node class the engines offer, with your uploaded files as choices.') }) },
  '/api/object_info/{cls}': {
    get: op('One node definition', { 200: json('V1ObjectInfo', 'The class, or `{}` when unknown.') }, { parameters: [pathParam('cls', 'Node class name.')] }),
  },
  '/api/embeddings': { get: op('Embedding names', { 200: json('V1NameList', 'As the engines last reported them.') }) },
  '/api/extensions': { get: op('Front-end extension scripts', { 200: json('V1NameList', 'Always empty: the service serves no front end.') }) },
  '/api/models': { get: op('Model folders', { 200: json('V1NameList', 'As the engines last reported them.') }) },
  '/api/models/{folder}': {
    get: op('Files in a model folder', { 200: json('V1NameList', 'As the engines last reported them.') }, { parameters: [pathParam('folder', 'Model folder name.')] }, [
      'not_found',
    ]),
  },
  '/api/experiment/models': {
    get: op('Model folders for the model library', { 200: inline('`[{name, folders}]`; `folders` (paths on disk) is always empty.', { type: 'array', items: MODEL_FOLDER }) }),
  },
  '/api/experiment/models/{folder}': {
    get: op('Files in a model folder, for the model library', { 200: inline('`[{name, pathIndex}]`.', { type: 'array', items: MODEL_FILE }) }, { parameters: [pathParam('folder', 'Model folder name.')] }, ['not_found']),
  },
  '/api/view_metadata/{folder}': {
    get: op(
      "A safetensors model's metadata",
      {},
      { description: 'The engines report no model headers, so this answers 404 as the engine does for a model without metadata.', parameters: [pathParam('folder', 'Model folder name.'), query('filename', 'Model file name.')] },
      ['not_found'],
    ),
  },
  '/api/i18n': { get: op("Custom nodes' translations", { 200: inline('Always `{}`: the engines report none.', { type: 'object' }) }) },
  '/api/workflow_templates': { get: op("Custom nodes' example workflows", { 200: inline('Node pack → workflow names; always `{}`: the engines report none.', { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } }) }) },
  '/templates/{file}': {
    get: op(
      'Workflow template files',
      {
        200: {
          description: '`index.json` (the template dialog\'s index), `default.json` (the stock text-to-image graph in the front end\'s format), `default-1.png` (its picture).',
          content: { 'application/json': { schema: { type: 'object' } }, 'image/png': { schema: { type: 'string', contentMediaType: 'image/png' } } },
        },
        404: engineText('Any other file: `404: Not Found`.'),
      },
      { parameters: [pathParam('file', 'File name.')] },
    ),
  },
  '/api/users': {
    get: op('The user', { 200: inline('`{storage: "server", migrated}`: the engine\'s single-user answer; the account is the one user. `migrated` once the user folder holds a file.', { type: 'object', properties: { storage: { type: 'string' }, migrated: { type: 'boolean' } } }) }),
    post: op('Add a user', { 400: inline('`{error}`: users are accounts here, made by operators.', ERROR_TEXT) }, anyJsonBody(false)),
  },
  '/api/settings': {
    get: op('All settings', { 200: inline('Setting id → value, from `comfy.settings.json` in the user folder.', { type: 'object' }) }),
    post: op('Merge settings', { 200: empty, 400: engineError, 413: engineText('The settings file would pass a `USERDATA_*` limit.') }, { description: 'The posted object\'s keys replace those settings; others stay.', ...anyJsonBody() }),
  },
  '/api/settings/{id}': {
    get: op('One setting', { 200: inline('Its value, or `null` when unset.', {}) }, { parameters: [pathParam('id', 'Setting id.')] }),
    post: op('Set one setting', { 200: empty, 400: engineError, 413: engineText('The settings file would pass a `USERDATA_*` limit.') }, { parameters: [pathParam('id', 'Setting id.')], ...anyJsonBody() }),
  },
  '/api/userdata': {
    get: op(
      'List a folder of the user folder',
      {
        200: inline('Paths relative to `dir`; `[path, ...segments]` with `split`; `{path, size, modified, created}` with `full_info`. Hidden names are skipped.', { type: 'array' }),
        400: engineText('`Directory not provided`.'),
        403: engineText('`Invalid directory`: `dir` leaves the user folder.'),
        404: engineText('`Directory not found`.'),
      },
      {
        parameters: [
          query('dir', 'Folder, relative to the user folder (`.` for itself).', { type: 'string' }, true),
          query('recurse', '`true`: files at any depth.'),
          query('split', '`true`: each path with its segments.'),
          query('full_info', '`true`: size and times.'),
        ],
      },
    ),
  },
  '/api/v2/userdata': {
    get: op(
      'List files and folders of the user folder',
      {
        200: inline('`[{name, path, type: "directory"|"file", size?, modified?}]`, folders first, by name.', { type: 'array' }),
        400: engineText('`Invalid path requested` or `Requested path is not a directory`.'),
        404: engineText('`Requested path not found`.'),
      },
      { parameters: [query('path', 'Folder, relative to the user folder; empty for the user folder.')] },
    ),
  },
  '/api/userdata/{file}': {
    get: op(
      'Read a file of the user folder',
      { 200: { description: 'The bytes as stored, typed by the file\'s extension (else as sent).', content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } }, 304: { description: 'Unchanged (`If-None-Match`, `If-Modified-Since`).' }, ...USERDATA_REFUSALS },
      { parameters: [USER_FILE] },
    ),
    post: op(
      'Write a file of the user folder',
      {
        200: inline('The path written, or `{path, size, modified, created}` with `full_info`.', {}),
        409: engineText('`File already exists` (`overwrite=false`).'),
        413: engineText('Past `USERDATA_MAX_FILE_BYTES`, `USERDATA_MAX_ACCOUNT_BYTES` or `USERDATA_MAX_FILES`.'),
        ...USERDATA_REFUSALS,
      },
      {
        description: 'The body is stored byte for byte, whatever its declared type.',
        parameters: [USER_FILE, query('overwrite', 'Anything but `false` overwrites.'), query('full_info', '`true`: answer with size and times.')],
        requestBody: { required: false, content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } },
      },
    ),
    delete: op('Delete a file of the user folder', { 204: { description: 'Deleted.' }, ...USERDATA_REFUSALS }, { parameters: [USER_FILE] }),
  },
  '/api/userdata/{file}/move/{dest}': {
    post: op(
      'Move a file of the user folder',
      { 200: inline('The new path, or `{path, size, modified, created}` with `full_info`.', {}), 409: engineText('The destination exists and `overwrite=false`.'), ...USERDATA_REFUSALS },
      { description: 'Onto a folder, the file moves into it.', parameters: [USER_FILE, pathParam('dest', 'Destination, percent-encoded like `file`.'), query('overwrite', 'Anything but `false` overwrites.'), query('full_info', '`true`: answer with size and times.')] },
    ),
  },
  '/api/internal/logs': { get: op("Your jobs' log as one text", { 200: inline('Every entry as `"{t} - {m}"`, joined: the last 300 lines your jobs wrote, never the engine\'s own log.', { type: 'string' }) }) },
  '/api/internal/logs/raw': {
    get: op("Your jobs' log entries", { 200: inline('`{entries: [{t, m}], size: {cols, rows}}`: the last 300 lines your jobs wrote.', { type: 'object' }) }),
  },
  '/api/internal/logs/subscribe': {
    patch: op('Have your jobs\' log lines pushed', { 200: empty, 400: engineError }, { description: '`{clientId, enabled}`: that client id\'s sockets get a `logs` message with each of your jobs\' lines as it ends.', ...anyJsonBody() }),
  },
  '/api/internal/folder_paths': { get: op('Model folders on disk', { 200: inline('Folder → paths; every list is empty (engine paths are not shown).', { type: 'object' }) }) },
  '/api/internal/files/{directory_type}': {
    get: op(
      'Files directly in a folder',
      { 200: json('V1NameList', '`input`: your uploads, newest first; `output`, `temp`: none (outputs lie in their prompt\'s subfolder).'), 400: inline('`{error: "Invalid directory type"}`.', ERROR_TEXT) },
      { parameters: [pathParam('directory_type', '`input`, `output` or `temp`.')] },
    ),
  },
  '/api/features': { get: op('Server features', { 200: json('V1Features', 'What clients read when they connect.') }) },
  '/api/system_stats': { get: op('System stats', { 200: json('V1SystemStats', 'The shape clients read; the engines are behind the service.') }) },
  '/api/upload/image': {
    post: op('Upload an input image', { 200: json('V1UploadResponse', 'Stored under a content-addressed name.') }, multipart('V1Upload'), ['invalid_request', 'payload_too_large', 'unsupported_media_type']),
  },
  '/api/upload/mask': {
    post: op('Upload a mask for an uploaded image', { 200: json('V1UploadResponse', 'The original with the mask applied, as a new file.') }, multipart('V1MaskUpload'), [
      'invalid_request',
      'not_found',
      'payload_too_large',
      'unsupported_media_type',
    ]),
  },
  '/api/prompt': {
    post: op(
      'Submit a workflow',
      { 200: json('V1PromptResponse', 'Queued; `prompt_id` is the job id (v2 sees the same job).'), 400: engineError },
      { description: 'Partner nodes need the key in `extra_data.api_key_comfy_org`.', ...jsonBody('V1PromptRequest') },
      ['insufficient_credits'],
    ),
    get: op('Queue summary', { 200: json('V1QueueInfo', 'How many of your jobs are in flight.') }),
  },
  '/api/job/{id}/status': {
    get: op('Job status', { 200: json('V1JobStatus', 'Poll until a terminal value.') }, { parameters: [pathParam('id', 'The prompt id.')] }, ['not_found']),
  },
  '/api/queue': {
    get: op('Your running and pending jobs', { 200: json('V1Queue', 'Running and pending jobs.') }),
    post: op('Cancel jobs', { 200: empty, 400: engineError }, { description: '`{delete: [prompt_id, ...]}` cancels those jobs; `{clear: true}` every pending one.', ...jsonBody('V1QueueRequest', false) }),
  },
  '/api/free': {
    post: op('Free engine memory', { 200: empty }, { description: 'Accepted for the engine\'s clients; the engines are shared between accounts, so it changes nothing.' }),
  },
  '/api/interrupt': {
    post: op('Interrupt running jobs', { 200: empty, 400: engineError }, jsonBody('V1InterruptRequest', false)),
  },
  '/api/history': {
    get: op('Finished jobs', { 200: json('V1History', 'Oldest first.') }, {
      parameters: [query('max_items', 'At most this many (default 200, at most 1000).', { type: 'integer' }), query('offset', 'Skip this many of the oldest; without it, the newest `max_items`.', { type: 'integer' })],
    }),
    post: op('Clear or prune the history', { 200: empty, 400: engineError }, {
      description: '`{clear: true}` empties your history, `{delete: [prompt_id, ...]}` takes those prompts out of it. The jobs stay: v2 still lists them and their outputs.',
      ...jsonBody('V1QueueRequest', false),
    }),
  },
  '/api/history/{id}': {
    get: op('One finished job', { 200: json('V1History', 'The job, or `{}` when unknown or unfinished.') }, { parameters: [pathParam('id', 'The prompt id.')] }),
  },
  '/api/view': {
    get: op(
      'Download an output or upload',
      {
        302: { description: 'Redirect to a signed URL. Do not follow it automatically with your key: read `Location` and fetch it with no credentials.', headers: { Location: { schema: { type: 'string', format: 'uri' } } } },
        200: { description: 'The bytes (self-hosted surface).', content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } },
      },
      {
        parameters: [query('filename', 'File name.', { type: 'string' }, true), query('subfolder', 'As the output reported it.'), query('type', '`output`, `input` or `temp`.')],
      },
      ['invalid_request', 'not_found'],
    ),
  },
};

const websocket = (summary: string): Obj => ({
  tags: ['v1'],
  summary,
  description:
    'WebSocket upgrade. Text frames `{type, data}` as the engine sends them (`status`, `execution_start`, `executing`, `progress`, `progress_state`, `executed`, ' +
    '`execution_cached`, `execution_success`, `execution_error`, `execution_interrupted`, `notification`), filtered to your account (on a deployment API, to the jobs of that deployment); binary preview frames ' +
    '(type 1, or 4 with metadata once `supports_preview_metadata` is declared in a `feature_flags` message). The key is checked before the upgrade.',
  'x-websocket': true,
  security: [{ v1Token: [] }, { v1ApiKey: [] }],
  parameters: [query('clientId', 'Any unique value (currently ignored).'), query('token', 'Your API key.')],
  responses: {
    101: { description: 'Switching protocols: the socket is open.' },
    ...envelopeResponses(['unauthorized', 'too_many_streams', 'rate_limited']),
  },
});

export const V1_WEBSOCKET_PATHS: Record<string, Obj> = {
  '/ws': { get: websocket('Live execution messages (WebSocket)') },
  '/api/ws': { get: websocket('Live execution messages (WebSocket, alias)') },
};
