import { submissionFault, type NativeErrors } from '../faults.js';
import { bearer, sendJson, type ProviderSim, type SimRequest } from '../sim-http.js';

// Luma Dream Machine (api.lumalabs.ai): `POST /dream-machine/v1/generations` answers 201 with the
// generation (`{id, state: queued, ...}`); `GET /dream-machine/v1/generations/{id}` until
// `state` is completed (`assets.video`, `assets.image`) or failed (`failure_reason`), through
// dreaming. Errors are FastAPI's `{detail}` (a 422 lists the fields).

const MEDIA_TTL_MS = 30 * 24 * 3600_000;
const DURATION_MS = 40_000;

function error(status: number, detail: string) {
  return (req: SimRequest) => sendJson(req.res, status, { detail });
}

const errors: NativeErrors = {
  busy: error(503, 'Service temporarily unavailable'),
  rateLimited: error(429, 'Too many concurrent generations for this account'),
  noCredit: error(402, 'Insufficient credits: please top up your Dream Machine API balance'),
  failure: error(500, 'Internal Server Error'),
  gatewayTimeout: error(504, 'Gateway Timeout'),
};

interface LumaTask extends Record<string, unknown> {
  request: unknown;
  videoId: string;
  imageId: string;
}

export function lumaSim(key: string): ProviderSim {
  const sim: ProviderSim = {
    name: 'luma',
    authorized: (req) => bearer(req.headers) === key,
    refuseCredentials: (req, given) => error(401, `Invalid API key: ${given}`)(req),
    async handle(req) {
      const id = /^\/dream-machine\/v1\/generations\/([^/]+)$/.exec(req.path)?.[1];
      if (req.method === 'POST' && req.path === '/dream-machine/v1/generations') return submit(req, sim);
      if (req.method === 'GET' && id) return poll(req, decodeURIComponent(id));
      error(404, 'Not Found')(req);
    },
  };
  return sim;
}

function generation(req: SimRequest, id: string, createdAt: number, data: LumaTask, state: string, extra: Record<string, unknown> = {}) {
  return { id, generation_type: 'video', state, failure_reason: null, created_at: new Date(createdAt).toISOString(), assets: null, model: 'ray-2', request: data.request, ...extra };
}

function submit(req: SimRequest, sim: ProviderSim): void {
  if (submissionFault(req, errors, () => sim.refuseCredentials(req, bearer(req.headers)))) return;
  const body = (req.json ?? {}) as { prompt?: unknown; model?: unknown; resolution?: unknown; duration?: unknown };
  if (req.steering.has('invalid')) {
    return sendJson(req.res, 422, { detail: [{ type: 'resolution_duration_unsupported', loc: ['body', 'resolution'], msg: `Resolution ${String(body.resolution ?? '4k')} is not available for ${String(body.duration ?? '9s')} generations`, input: body.resolution ?? '4k' }] });
  }
  if (typeof body.prompt !== 'string') return sendJson(req.res, 422, { detail: [{ type: 'missing', loc: ['body', 'prompt'], msg: 'Field required', input: req.json }] });
  if (req.steering.has('refuse')) return error(400, '400: prompt not allowed because advanced moderation failed')(req);
  const size = req.steering.get('size') ?? 65_536;
  const broken = req.steering.has('mediafail');
  const video = req.media.add('video/mp4', size, MEDIA_TTL_MS, { broken });
  const image = req.media.add('image/jpeg', 4_096, MEDIA_TTL_MS, { broken });
  const task = req.tasks.create<LumaTask>('luma', req.steering, req.durationMs(DURATION_MS), { request: req.json, videoId: video.id, imageId: image.id }, { queuedMs: Math.min(2_000, req.durationMs(DURATION_MS) / 5) });
  sendJson(req.res, 201, generation(req, task.id, task.createdAt, task.data, 'queued'));
}

function poll(req: SimRequest, id: string): void {
  const task = req.tasks.get<LumaTask>('luma', id);
  if (!task || task.steering.has('lost')) return error(404, 'Generation not found')(req);
  const phase = req.tasks.phase(task);
  if (phase !== 'done') return sendJson(req.res, 200, generation(req, id, task.createdAt, task.data, phase === 'queued' ? 'queued' : 'dreaming'));
  req.finalServed(id);
  const s = task.steering;
  if (s.has('refuse-output')) return sendJson(req.res, 200, generation(req, id, task.createdAt, task.data, 'failed', { failure_reason: 'Generation failed because the output did not pass moderation' }));
  if (s.has('fail')) return sendJson(req.res, 200, generation(req, id, task.createdAt, task.data, 'failed', { failure_reason: 'Internal error while dreaming, please retry' }));
  if (s.has('weird')) return sendJson(req.res, 200, generation(req, id, task.createdAt, task.data, 'hibernating'));
  sendJson(req.res, 200, generation(req, id, task.createdAt, task.data, 'completed', { assets: { video: req.mediaUrl(task.data.videoId), image: req.mediaUrl(task.data.imageId) } }));
}
