import { randomInt } from 'node:crypto';
import { submissionFault, type NativeErrors } from '../faults.js';
import { bearer, sendJson, type ProviderSim, type SimRequest } from '../sim-http.js';

// MiniMax (api.minimax.io), three hops: `POST /v1/video_generation` answers `{task_id,
// base_resp}`; `GET /v1/query/video_generation?task_id=` until `status` is Success (with a
// `file_id`) or Fail, through Queueing, Preparing and Processing; `GET /v1/files/retrieve?file_id=`
// gives the file with its `download_url`. Outcomes are `base_resp.status_code` (0 is success),
// usually inside an HTTP 200: 1002 rate limit, 1004 authentication, 1008 balance, 1026 sensitive
// input, 1027 sensitive output, 2013 invalid parameters.

const MEDIA_TTL_MS = 9 * 3600_000;
const DURATION_MS = 45_000;

const base = (status_code: number, status_msg: string) => ({ base_resp: { status_code, status_msg } });

function refusal(code: number, message: string, status = 200) {
  return (req: SimRequest) => sendJson(req.res, status, { task_id: '', ...base(code, message) });
}

const errors: NativeErrors = {
  busy: (req) => sendJson(req.res, 503, { error: 'Service Unavailable' }),
  rateLimited: refusal(1002, 'rate limit exceeded, please retry later'),
  noCredit: refusal(1008, 'insufficient balance'),
  failure: refusal(1000, 'unknown error'),
  gatewayTimeout: (req) => sendJson(req.res, 504, { error: 'Gateway Timeout' }),
};

interface MinimaxTask extends Record<string, unknown> {
  fileId: number;
  mediaId: string;
  width: number;
  height: number;
}

export function minimaxSim(key: string): ProviderSim {
  const files = new Map<number, { mediaId: string; size: number; createdAt: number }>();
  const sim: ProviderSim = {
    name: 'minimax',
    authorized: (req) => bearer(req.headers) === key,
    refuseCredentials: (req, given) => refusal(1004, `authorized error, please check your api key (${given})`)(req),
    async handle(req) {
      if (req.method === 'POST' && req.path === '/v1/video_generation') return submit(req, sim, files);
      if (req.method === 'GET' && req.path === '/v1/query/video_generation') return query(req);
      if (req.method === 'GET' && req.path === '/v1/files/retrieve') return retrieve(req, files);
      sendJson(req.res, 404, { error: 'Not Found' });
    },
  };
  return sim;
}

function submit(req: SimRequest, sim: ProviderSim, files: Map<number, { mediaId: string; size: number; createdAt: number }>): void {
  if (submissionFault(req, errors, () => sim.refuseCredentials(req, bearer(req.headers)))) return;
  const body = (req.json ?? {}) as { model?: unknown; prompt?: unknown; duration?: unknown; resolution?: unknown };
  if (req.steering.has('invalid')) return refusal(2013, `invalid params, duration ${String(body.duration ?? 10)} is not supported with resolution ${String(body.resolution ?? '1080P')}`)(req);
  if (typeof body.model !== 'string') return refusal(2013, 'invalid params, model is required')(req);
  if (req.steering.has('refuse')) return refusal(1026, 'input new_sensitive, please adjust the prompt')(req);
  const size = req.steering.get('size') ?? 65_536;
  const media = req.media.add('video/mp4', size, MEDIA_TTL_MS, { broken: req.steering.has('mediafail') });
  const fileId = randomInt(100_000_000, 999_999_999);
  files.set(fileId, { mediaId: media.id, size, createdAt: Math.floor(Date.now() / 1000) });
  const p1080 = body.resolution === '1080P';
  const task = req.tasks.create<MinimaxTask>('minimax', req.steering, req.durationMs(DURATION_MS), { fileId, mediaId: media.id, width: p1080 ? 1920 : 1366, height: p1080 ? 1080 : 768 }, { id: String(randomInt(100_000_000, 999_999_999)), queuedMs: Math.min(3_000, req.durationMs(DURATION_MS) / 5) });
  sendJson(req.res, 200, { task_id: task.id, ...base(0, 'success') });
}

function query(req: SimRequest): void {
  const id = req.query.get('task_id') ?? '';
  const task = req.tasks.get<MinimaxTask>('minimax', id);
  if (!task || task.steering.has('lost')) return sendJson(req.res, 200, { task_id: id, status: '', ...base(2013, 'invalid params, task not found') });
  const phase = req.tasks.phase(task);
  if (phase === 'queued') return sendJson(req.res, 200, { task_id: id, status: 'Queueing', ...base(0, 'success') });
  if (phase === 'running') return sendJson(req.res, 200, { task_id: id, status: req.tasks.progress(task) < 0.1 ? 'Preparing' : 'Processing', ...base(0, 'success') });
  req.finalServed(id);
  const s = task.steering;
  if (s.has('refuse-output')) return sendJson(req.res, 200, { task_id: id, status: 'Fail', ...base(1027, 'output new_sensitive') });
  if (s.has('fail')) return sendJson(req.res, 200, { task_id: id, status: 'Fail', ...base(1000, 'unknown error') });
  if (s.has('weird')) return sendJson(req.res, 200, { task_id: id, status: 'Suspended', ...base(0, 'success') });
  sendJson(req.res, 200, { task_id: id, status: 'Success', file_id: String(task.data.fileId), video_width: task.data.width, video_height: task.data.height, ...base(0, 'success') });
}

function retrieve(req: SimRequest, files: Map<number, { mediaId: string; size: number; createdAt: number }>): void {
  const fileId = Number(req.query.get('file_id'));
  const file = files.get(fileId);
  if (!file) return sendJson(req.res, 200, { ...base(2013, 'invalid params, file not found') });
  sendJson(req.res, 200, {
    file: { file_id: fileId, bytes: file.size, created_at: file.createdAt, filename: 'output.mp4', purpose: 'video_generation', download_url: req.mediaUrl(file.mediaId) },
    ...base(0, 'success'),
  });
}
