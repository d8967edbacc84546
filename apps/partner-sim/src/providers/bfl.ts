import { submissionFault, type NativeErrors } from '../faults.js';
import { sendJson, type ProviderSim, type SimRequest } from '../sim-http.js';

// Black Forest Labs (api.bfl.ai): `POST /v1/{model}` with `x-key` answers `{id, polling_url}`;
// `GET` the polling URL (`/v1/get_result?id=`) until `status` is Ready (`result.sample` is a
// signed delivery URL that expires after about 10 minutes), Request Moderated, Content Moderated,
// Error or Task not found. Validation errors are FastAPI's 422 `{detail: [...]}`.

const MODELS: Record<string, number> = { 'flux-pro-1.1': 4_000, 'flux-pro-1.1-ultra': 8_000 };
const DELIVERY_TTL_MS = 10 * 60_000;

const errors: NativeErrors = {
  busy: (req) => sendJson(req.res, 503, { detail: 'Service temporarily unavailable, please retry.' }),
  rateLimited: (req) => sendJson(req.res, 429, { detail: 'You have exceeded the number of active tasks (24). Please wait for some tasks to complete.' }),
  noCredit: (req) => sendJson(req.res, 402, { detail: 'Insufficient credits. Please add credits at https://api.bfl.ai.' }),
  failure: (req) => sendJson(req.res, 500, { detail: 'Internal Server Error' }),
  gatewayTimeout: (req) => sendJson(req.res, 504, { detail: 'Gateway Timeout' }),
};

interface BflTask extends Record<string, unknown> {
  prompt: string;
  seed: number;
  mediaId: string;
}

export function bflSim(key: string): ProviderSim {
  return {
    name: 'bfl',
    authorized: (req) => req.headers['x-key'] === key,
    refuseCredentials: (req, given) => sendJson(req.res, 403, { detail: `Not authenticated - Invalid Authentication (x-key ${given})` }),
    async handle(req) {
      const model = /^\/v1\/([a-z0-9.-]+)$/.exec(req.path)?.[1];
      if (req.method === 'POST' && model && model in MODELS) return submit(req, model, this);
      if (req.method === 'GET' && req.path === '/v1/get_result') return poll(req);
      sendJson(req.res, 404, { detail: 'Not Found' });
    },
  };
}

function submit(req: SimRequest, model: string, sim: ProviderSim): void {
  if (submissionFault(req, errors, () => sim.refuseCredentials(req, String(req.headers['x-key'] ?? '')))) return;
  const body = (req.json ?? {}) as { prompt?: unknown; seed?: unknown; width?: unknown; output_format?: unknown };
  if (req.steering.has('invalid')) {
    return sendJson(req.res, 422, {
      detail: [
        { type: 'multiple_of', loc: ['body', 'width'], msg: 'Input should be a multiple of 32', input: body.width ?? 1000, ctx: { multiple_of: 32 } },
        { type: 'prompt_unsupported_glyphs', loc: ['body', 'prompt'], msg: 'The prompt contains characters the model cannot render', input: body.prompt ?? '' },
      ],
    });
  }
  if (typeof body.prompt !== 'string') return sendJson(req.res, 422, { detail: [{ type: 'missing', loc: ['body', 'prompt'], msg: 'Field required', input: req.json }] });
  const format = body.output_format === 'png' ? 'image/png' : 'image/jpeg';
  const media = req.media.add(format, req.steering.get('size') ?? 24_576, DELIVERY_TTL_MS, { broken: req.steering.has('mediafail') });
  const task = req.tasks.create<BflTask>('bfl', req.steering, req.durationMs(MODELS[model]!), { prompt: body.prompt, seed: typeof body.seed === 'number' ? body.seed : 1_234_567, mediaId: media.id });
  sendJson(req.res, 200, { id: task.id, polling_url: `${req.origin}/bfl/v1/get_result?id=${task.id}` });
}

function poll(req: SimRequest): void {
  const id = req.query.get('id') ?? '';
  const task = req.tasks.get<BflTask>('bfl', id);
  const base = { id, result: null, progress: null, details: null, preview: null };
  if (!task || task.steering.has('lost')) return sendJson(req.res, 200, { ...base, status: 'Task not found' });
  if (req.tasks.phase(task) !== 'done') return sendJson(req.res, 200, { ...base, status: 'Pending', progress: req.tasks.progress(task) });
  req.finalServed(task.id);
  const s = task.steering;
  if (s.has('refuse')) return sendJson(req.res, 200, { ...base, status: 'Request Moderated', details: { 'Moderation Reasons': ['Derivative Works Filter'] } });
  if (s.has('refuse-output')) return sendJson(req.res, 200, { ...base, status: 'Content Moderated', details: { 'Moderation Reasons': ['NSFW'] } });
  if (s.has('fail')) return sendJson(req.res, 200, { ...base, status: 'Error', details: { error: 'Generation failed on the inference worker' } });
  if (s.has('weird')) return sendJson(req.res, 200, { ...base, status: 'Escalated For Review' });
  const started = task.startsAt / 1000;
  const ended = task.readyAt / 1000;
  sendJson(req.res, 200, {
    ...base,
    status: 'Ready',
    progress: 1,
    result: { sample: req.mediaUrl(task.data.mediaId), prompt: task.data.prompt, seed: task.data.seed, start_time: started, end_time: ended, duration: Math.round((ended - started) * 1000) / 1000 },
  });
}
