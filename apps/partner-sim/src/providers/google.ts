import { submissionFault, type NativeErrors } from '../faults.js';
import { sendJson, type ProviderSim, type SimRequest } from '../sim-http.js';

// Google's Gemini API for Veo (generativelanguage.googleapis.com), a long-running operation:
// `POST /v1beta/models/veo-3.0-generate-001:predictLongRunning` (key in `x-goog-api-key`)
// answers `{name}`; `GET /v1beta/{name}` until `done: true`, then either `response` (the videos'
// file URIs, which need the same key to download) or `error`. Videos its safety filters withheld
// are not an HTTP error: the operation is done, with `raiMediaFilteredCount` and the reasons.
// Errors are `{error: {code, message, status, details}}`.

const MODEL = 'veo-3.0-generate-001';
const DURATION_MS = 60_000;
const MEDIA_TTL_MS = 2 * 24 * 3600_000;

function error(code: number, status: string, message: string, details?: unknown[]) {
  return (req: SimRequest) => sendJson(req.res, code, { error: { code, message, status, ...(details ? { details } : {}) } });
}

const errors: NativeErrors = {
  busy: error(503, 'UNAVAILABLE', 'The model is overloaded. Please try again later.'),
  rateLimited: error(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).'),
  noCredit: error(429, 'RESOURCE_EXHAUSTED', 'You exceeded your current quota, please check your plan and billing details.', [
    { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [{ quotaMetric: 'generativelanguage.googleapis.com/generate_requests_per_model_per_day', quotaId: 'GenerateRequestsPerDayPerProjectPerModel' }] },
  ]),
  failure: error(500, 'INTERNAL', 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting'),
  gatewayTimeout: error(504, 'DEADLINE_EXCEEDED', 'The request timed out. Please try again.'),
};

interface VeoTask extends Record<string, unknown> {
  fileId: string;
}

/** The key Google reads: `x-goog-api-key`, or the `key` query parameter. */
function keyOf(req: SimRequest): string {
  return String(req.headers['x-goog-api-key'] ?? req.query.get('key') ?? '');
}

export function googleSim(key: string): ProviderSim {
  const sim: ProviderSim = {
    name: 'google',
    authorized: (req) => keyOf(req) === key,
    refuseCredentials: (req, given) =>
      error(400, 'INVALID_ARGUMENT', `API key not valid. Please pass a valid API key. (${given})`, [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' }])(req),
    async handle(req) {
      if (req.method === 'POST' && req.path === `/v1beta/models/${MODEL}:predictLongRunning`) return submit(req, sim);
      const operation = new RegExp(`^/v1beta/(models/${MODEL}/operations/[^/]+)$`).exec(req.path)?.[1];
      if (req.method === 'GET' && operation) return poll(req, operation);
      const file = /^\/v1beta\/files\/([^/:]+):download$/.exec(req.path)?.[1];
      if (req.method === 'GET' && file) return download(req, file);
      error(404, 'NOT_FOUND', `Method not found: ${req.method} ${req.path}`)(req);
    },
  };
  return sim;
}

function submit(req: SimRequest, sim: ProviderSim): void {
  if (submissionFault(req, errors, () => sim.refuseCredentials(req, keyOf(req)))) return;
  const body = (req.json ?? {}) as { instances?: unknown; parameters?: { durationSeconds?: unknown } };
  if (req.steering.has('invalid')) {
    return error(400, 'INVALID_ARGUMENT', '* GenerateVideoRequest.parameters.duration_seconds: Veo 3 generates 8 second videos only.', [
      { '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field: 'parameters.durationSeconds', description: 'Veo 3 generates 8 second videos only.' }] },
    ])(req);
  }
  if (!Array.isArray(body.instances) || body.instances.length === 0) return error(400, 'INVALID_ARGUMENT', '* GenerateVideoRequest.instances: at least one instance is required.')(req);
  if (req.steering.has('refuse')) {
    return error(400, 'INVALID_ARGUMENT', "The prompt could not be submitted. This prompt contains sensitive words that violate Google's Responsible AI practices. Try rephrasing the prompt. Support codes: 17301594")(req);
  }
  // The file's id is the media's own.
  const media = req.media.add('video/mp4', req.steering.get('size') ?? 65_536, MEDIA_TTL_MS, { requires: { header: 'x-goog-api-key', value: keyOf(req) }, broken: req.steering.has('mediafail') });
  const task = req.tasks.create<VeoTask>('google', req.steering, req.durationMs(DURATION_MS), { fileId: media.id });
  sendJson(req.res, 200, { name: `models/${MODEL}/operations/${task.id}` });
}

function poll(req: SimRequest, name: string): void {
  const id = name.slice(name.lastIndexOf('/') + 1);
  const task = req.tasks.get<VeoTask>('google', id);
  if (!task || task.steering.has('lost')) return error(404, 'NOT_FOUND', `Operation ${name} not found.`)(req);
  if (req.tasks.phase(task) !== 'done') return sendJson(req.res, 200, { name });
  req.finalServed(id);
  const s = task.steering;
  if (s.has('fail')) return sendJson(req.res, 200, { name, done: true, error: { code: 13, message: 'Internal error encountered while generating the video.' } });
  if (s.has('weird')) return sendJson(req.res, 200, { name, done: true });
  const responseType = 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse';
  if (s.has('refuse-output')) {
    return sendJson(req.res, 200, {
      name,
      done: true,
      response: {
        '@type': responseType,
        generateVideoResponse: { raiMediaFilteredCount: 1, raiMediaFilteredReasons: ['Veo could not generate 1 videos based on the prompt provided. You will not be charged for this request. Try rephrasing the prompt. Support codes: 42237218'] },
      },
    });
  }
  const uri = `${req.origin}/google/v1beta/files/${task.data.fileId}:download?alt=media`;
  sendJson(req.res, 200, { name, done: true, response: { '@type': responseType, generateVideoResponse: { generatedSamples: [{ video: { uri } }] } } });
}

function download(req: SimRequest, mediaId: string | undefined): void {
  const media = mediaId ? req.media.get(mediaId) : undefined;
  if (!media || media.broken) return error(404, 'NOT_FOUND', 'File not found.')(req);
  req.media.send(req.res, media);
}
