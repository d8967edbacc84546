import { submissionFault, type NativeErrors } from '../faults.js';
import { bearer, sendJson, type ProviderSim, type SimRequest } from '../sim-http.js';

// Runway (api.dev.runwayml.com): every request carries a bearer key and `X-Runway-Version:
// 2024-11-06`. `POST /v1/image_to_video` answers `{id}`; `GET /v1/tasks/{id}` reports `status`
// PENDING, THROTTLED (waiting for the account's concurrency), RUNNING (with `progress`), then
// SUCCEEDED (`output: [url]`), FAILED (`failure`, `failureCode` such as SAFETY.INPUT.TEXT or
// SAFETY.OUTPUT.VIDEO) or CANCELLED. Errors are `{error}`, a bad body with its `issues`.

export const RUNWAY_VERSION = '2024-11-06';
const MEDIA_TTL_MS = 24 * 3600_000;
const DURATION_MS = 30_000;

function error(status: number, message: string, extra: Record<string, unknown> = {}) {
  return (req: SimRequest) => sendJson(req.res, status, { error: message, ...extra });
}

const errors: NativeErrors = {
  busy: error(503, 'Service unavailable, please try again later.'),
  rateLimited: error(429, 'You have exceeded the rate limit for this model. Please slow down.'),
  noCredit: error(400, 'You do not have enough credits to run this task.'),
  failure: error(500, 'An internal error occurred.'),
  gatewayTimeout: error(504, 'Gateway timeout.'),
};

interface RunwayTask extends Record<string, unknown> {
  mediaId: string;
}

export function runwaySim(key: string): ProviderSim {
  const sim: ProviderSim = {
    name: 'runway',
    authorized: (req) => bearer(req.headers) === key,
    refuseCredentials: (req, given) => error(401, `Incorrect API key provided (${given}).`)(req),
    async handle(req) {
      if (req.headers['x-runway-version'] !== RUNWAY_VERSION) return error(400, `The X-Runway-Version header is required and must be ${RUNWAY_VERSION}.`)(req);
      const id = /^\/v1\/tasks\/([^/]+)$/.exec(req.path)?.[1];
      if (req.method === 'POST' && req.path === '/v1/image_to_video') return submit(req, sim);
      if (req.method === 'GET' && id) return poll(req, decodeURIComponent(id));
      error(404, 'Not found.')(req);
    },
  };
  return sim;
}

function submit(req: SimRequest, sim: ProviderSim): void {
  if (submissionFault(req, errors, () => sim.refuseCredentials(req, bearer(req.headers)))) return;
  const body = (req.json ?? {}) as { promptImage?: unknown; model?: unknown; ratio?: unknown };
  if (req.steering.has('invalid')) {
    return error(400, 'Validation of body failed', { issues: [{ code: 'image_dimensions_too_small', path: ['promptImage'], message: 'The prompt image must be at least 640 pixels on its shorter side.' }] })(req);
  }
  if (body.promptImage === undefined) return error(400, 'Validation of body failed', { issues: [{ code: 'invalid_type', path: ['promptImage'], message: 'Required' }] })(req);
  const media = req.media.add('video/mp4', req.steering.get('size') ?? 65_536, MEDIA_TTL_MS, { broken: req.steering.has('mediafail') });
  const queuedMs = req.steering.get('throttled') ?? 0;
  const task = req.tasks.create<RunwayTask>('runway', req.steering, req.durationMs(DURATION_MS), { mediaId: media.id }, { queuedMs });
  sendJson(req.res, 200, { id: task.id });
}

function poll(req: SimRequest, id: string): void {
  const task = req.tasks.get<RunwayTask>('runway', id);
  if (!task || task.steering.has('lost')) return error(404, 'Task not found.')(req);
  const base = { id, createdAt: new Date(task.createdAt).toISOString() };
  const phase = req.tasks.phase(task);
  if (phase === 'queued') return sendJson(req.res, 200, { ...base, status: task.steering.has('throttled') ? 'THROTTLED' : 'PENDING' });
  if (phase === 'running') return sendJson(req.res, 200, { ...base, status: 'RUNNING', progress: req.tasks.progress(task) });
  req.finalServed(id);
  const s = task.steering;
  const failed = (failure: string, failureCode: string) => sendJson(req.res, 200, { ...base, status: 'FAILED', failure, failureCode });
  if (s.has('refuse')) return failed('The prompt text did not pass our content moderation.', 'SAFETY.INPUT.TEXT');
  if (s.has('refuse-output')) return failed('The generated video did not pass our content moderation.', 'SAFETY.OUTPUT.VIDEO');
  if (s.has('fail')) return failed('An unexpected error occurred.', 'INTERNAL');
  if (s.has('weird')) return sendJson(req.res, 200, { ...base, status: 'ARCHIVED' });
  sendJson(req.res, 200, { ...base, status: 'SUCCEEDED', output: [req.mediaUrl(task.data.mediaId)] });
}
