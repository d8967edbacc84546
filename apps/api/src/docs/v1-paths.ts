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
