import { randomUUID } from 'node:crypto';
import { jwtVerify } from 'jose';
import { submissionFault, type NativeErrors } from '../faults.js';
import { bearer, sendJson, type ProviderSim, type SimRequest } from '../sim-http.js';

// Kling (api-singapore.klingai.com): every request carries `Authorization: Bearer <JWT>`, a token
// the caller signs itself (HS256 with its secret key, `iss` its access key, short `exp`).
// `POST /v1/videos/text2video` answers `{code, message, request_id, data: {task_id,
// task_status}}`; `GET /v1/videos/text2video/{task_id}` until `task_status` is succeed (videos in
// `data.task_result.videos[].url`) or failed (`task_status_msg`). A refused request is not always
// an HTTP error: `code` other than 0 says it, often inside a 200.

const MEDIA_TTL_MS = 30 * 24 * 3600_000;
const DURATION_MS = 60_000;

function envelope(code: number, message: string, data?: unknown) {
  return { code, message, request_id: randomUUID(), ...(data === undefined ? {} : { data }) };
}

function error(status: number, code: number, message: string) {
  return (req: SimRequest) => sendJson(req.res, status, envelope(code, message));
}

const errors: NativeErrors = {
  busy: error(503, 5001, 'Service temporarily unavailable'),
  rateLimited: error(429, 1302, 'API request too frequent, please slow down'),
  noCredit: error(200, 1102, 'Account balance not enough: resource pack depleted or expired'),
  failure: error(500, 5000, 'Internal server error'),
  gatewayTimeout: error(504, 5002, 'Server internal timeout'),
};

interface KlingTask extends Record<string, unknown> {
  mediaId: string;
  externalTaskId?: string;
  duration: string;
}

export function klingSim(accessKey: string, secretKey: string): ProviderSim {
  const secret = new TextEncoder().encode(secretKey);
  // Tokens verified once, then remembered until they expire.
  let verified = new Map<string, number>();
  const sim: ProviderSim = {
    name: 'kling',
    async authorized(req) {
      const token = bearer(req.headers);
      const until = verified.get(token);
      if (until !== undefined) return until > Date.now();
      try {
        const { payload } = await jwtVerify(token, secret, { algorithms: ['HS256'], issuer: accessKey });
        if (typeof payload.exp !== 'number') return false;
        if (verified.size > 10_000) verified = new Map();
        verified.set(token, payload.exp * 1000);
        return true;
      } catch {
        return false;
      }
    },
    refuseCredentials: (req, given) => error(401, 1002, `Authorization is invalid: ${given}`)(req),
    async handle(req) {
      const task = /^\/v1\/videos\/text2video\/([^/]+)$/.exec(req.path)?.[1];
      if (req.method === 'POST' && req.path === '/v1/videos/text2video') return submit(req, sim);
      if (req.method === 'GET' && task) return poll(req, decodeURIComponent(task));
      error(404, 1203, 'Requested resource does not exist')(req);
    },
  };
  return sim;
}

function submit(req: SimRequest, sim: ProviderSim): void {
  if (submissionFault(req, errors, () => sim.refuseCredentials(req, bearer(req.headers)))) return;
  const body = (req.json ?? {}) as { model_name?: unknown; mode?: unknown; duration?: unknown; prompt?: unknown; external_task_id?: unknown };
  if (req.steering.has('invalid')) return sendJson(req.res, 200, envelope(1201, `Invalid parameters: mode '${String(body.mode ?? 'std')}' is not supported with duration '${String(body.duration ?? '10')}' for this model`));
  if (typeof body.prompt !== 'string' || body.prompt === '') return sendJson(req.res, 400, envelope(1201, 'prompt is required'));
  if (req.steering.has('refuse')) return sendJson(req.res, 200, envelope(1301, 'Trigger the content security policy of the platform'));
  const media = req.media.add('video/mp4', req.steering.get('size') ?? 65_536, MEDIA_TTL_MS, { broken: req.steering.has('mediafail') });
  const duration = body.duration === '10' ? '10' : '5';
  const task = req.tasks.create<KlingTask>('kling', req.steering, req.durationMs(DURATION_MS), {
    mediaId: media.id,
    duration,
    ...(typeof body.external_task_id === 'string' ? { externalTaskId: body.external_task_id } : {}),
  });
  sendJson(req.res, 200, envelope(0, 'SUCCEED', taskData(req, task.id, 'submitted', task.createdAt, task.data)));
}

function taskData(req: SimRequest, id: string, status: string, createdAt: number, data: KlingTask, extra: Record<string, unknown> = {}) {
  return { task_id: id, task_status: status, task_info: data.externalTaskId ? { external_task_id: data.externalTaskId } : {}, created_at: createdAt, updated_at: Date.now(), ...extra };
}

function poll(req: SimRequest, id: string): void {
  const task = req.tasks.get<KlingTask>('kling', id);
  if (!task || task.steering.has('lost')) return error(404, 1203, 'Requested resource does not exist')(req);
  const phase = req.tasks.phase(task);
  if (phase !== 'done') return sendJson(req.res, 200, envelope(0, 'SUCCEED', taskData(req, id, phase === 'queued' ? 'submitted' : 'processing', task.createdAt, task.data)));
  req.finalServed(id);
  const s = task.steering;
  const failed = (msg: string) => sendJson(req.res, 200, envelope(0, 'SUCCEED', taskData(req, id, 'failed', task.createdAt, task.data, { task_status_msg: msg })));
  if (s.has('refuse-output')) return failed('Failure to pass the risk control system: the generated content violates the content security policy');
  if (s.has('fail')) return failed('Generation failed, internal error, please try again later');
  if (s.has('weird')) return sendJson(req.res, 200, envelope(0, 'SUCCEED', taskData(req, id, 'archived', task.createdAt, task.data)));
  sendJson(req.res, 200, envelope(0, 'SUCCEED', taskData(req, id, 'succeed', task.createdAt, task.data, {
    task_status_msg: '',
    task_result: { videos: [{ id: randomUUID(), url: req.mediaUrl(task.data.mediaId), duration: task.data.duration }] },
  })));
}
