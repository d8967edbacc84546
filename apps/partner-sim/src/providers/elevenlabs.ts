import { randomUUID } from 'node:crypto';
import { submissionFault, type NativeErrors } from '../faults.js';
import { mediaBytes } from '../media.js';
import { sendJson, sleep, type ProviderSim, type SimRequest } from '../sim-http.js';

// ElevenLabs (api.elevenlabs.io): `POST /v1/text-to-speech/{voice_id}?output_format=...` with an
// `xi-api-key` header answers with the audio itself, in the media type of the format asked
// (audio/mpeg for mp3_*). Errors are `{detail: {status, message}}`; a body that fails validation
// is FastAPI's 422 `{detail: [{loc, msg, type}]}`; a used-up quota is a 401 `quota_exceeded`.

const VOICES = new Set(['JBFqnCBsd6RMkjVDRZzb', '21m00Tcm4TlvDq8ikWAM', 'EXAVITQu4vr4xnSDxMaL']);

export function audioTypeOf(format: string): string {
  if (format.startsWith('mp3_')) return 'audio/mpeg';
  if (format.startsWith('pcm_')) return 'audio/pcm';
  if (format.startsWith('opus_')) return 'audio/opus';
  if (format.startsWith('ulaw_') || format.startsWith('alaw_')) return 'audio/basic';
  return 'application/octet-stream';
}

function error(status: number, code: string, message: string) {
  return (req: SimRequest) => sendJson(req.res, status, { detail: { status: code, message } });
}

const errors: NativeErrors = {
  busy: error(503, 'system_busy', 'The system is experiencing heavy traffic, please try again later.'),
  rateLimited: error(429, 'too_many_concurrent_requests', 'Too many concurrent requests: your subscription allows 5 at a time.'),
  noCredit: error(401, 'quota_exceeded', 'This request exceeds your quota of 10000. You have 12 credits remaining, while 43 credits are required for this request.'),
  failure: error(500, 'internal_error', 'An internal error occurred.'),
  gatewayTimeout: error(504, 'gateway_timeout', 'Gateway timeout.'),
};

export function elevenlabsSim(key: string): ProviderSim {
  const sim: ProviderSim = {
    name: 'elevenlabs',
    authorized: (req) => req.headers['xi-api-key'] === key,
    refuseCredentials: (req, given) => error(401, 'invalid_api_key', `Invalid API key: ${given}`)(req),
    async handle(req) {
      const voice = /^\/v1\/text-to-speech\/([^/]+)$/.exec(req.path)?.[1];
      if (req.method !== 'POST' || !voice) return sendJson(req.res, 404, { detail: 'Not Found' });
      const body = (req.json ?? {}) as { text?: unknown; model_id?: unknown };
      await sleep(req.durationMs(1_500));
      if (submissionFault(req, errors, () => sim.refuseCredentials(req, String(req.headers['xi-api-key'] ?? '')))) return;
      if (req.steering.has('invalid')) return sendJson(req.res, 422, { detail: [{ loc: ['body', 'voice_settings', 'stability'], msg: 'stability must be one of 0.0, 0.5 or 1.0 for eleven_v3', type: 'value_error.v3_stability_preset' }] });
      if (typeof body.text !== 'string') return sendJson(req.res, 422, { detail: [{ loc: ['body', 'text'], msg: 'field required', type: 'value_error.missing' }] });
      if (!VOICES.has(decodeURIComponent(voice))) return error(400, 'voice_not_found', `A voice with the voice_id ${decodeURIComponent(voice)} was not found.`)(req);
      if (req.steering.has('refuse') || req.steering.has('refuse-output')) return error(400, 'content_against_policy', 'The text violates our terms of service and was not converted.')(req);
      if (req.steering.has('fail')) return errors.failure(req);
      if (req.steering.has('json')) return sendJson(req.res, 200, { status: 'ok' });
      const format = req.query.get('output_format') ?? 'mp3_44100_128';
      const audio = mediaBytes({ id: `${voice}-${body.text.length}`, contentType: audioTypeOf(format) }, 0, req.steering.get('size') ?? Math.max(2_048, body.text.length * 64));
      req.res.writeHead(200, { 'content-type': audioTypeOf(format), 'content-length': audio.length, 'request-id': randomUUID(), 'character-cost': String(body.text.length) });
      req.res.end(audio);
    },
  };
  return sim;
}
