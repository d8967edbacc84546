import { submissionFault, type NativeErrors } from '../faults.js';
import { sendJson, sleep, type ProviderSim, type SimRequest } from '../sim-http.js';

// Ideogram (api.ideogram.ai): `POST /v1/ideogram-v3/generate` takes multipart/form-data with an
// `Api-Key` header and answers at once with `{created, data: [{prompt, resolution,
// is_image_safe, seed, style_type, url}]}`; an image its checks flag comes back with
// `is_image_safe: false` and no URL. A prompt that fails the safety checks is a 422 `{error}`.

const MEDIA_TTL_MS = 24 * 3600_000;
const SPEEDS = ['FLASH', 'TURBO', 'DEFAULT', 'QUALITY'];

function error(status: number, message: string) {
  return (req: SimRequest) => sendJson(req.res, status, { error: message });
}

const errors: NativeErrors = {
  busy: error(503, 'Service Unavailable'),
  rateLimited: error(429, 'Too many requests: at most 10 in-flight requests are allowed.'),
  noCredit: error(402, 'Insufficient balance: top up your API credits to continue.'),
  failure: error(500, 'Internal server error'),
  gatewayTimeout: error(504, 'Gateway Timeout'),
};

export function ideogramSim(key: string): ProviderSim {
  return {
    name: 'ideogram',
    authorized: (req) => req.headers['api-key'] === key,
    refuseCredentials: (req, given) => error(401, `Invalid Api-Key: ${given}`)(req),
    async handle(req) {
      if (req.method !== 'POST' || req.path !== '/v1/ideogram-v3/generate') return error(404, 'Not Found')(req);
      if (!req.form) return error(400, 'Expected a multipart/form-data body.')(req);
      await sleep(req.durationMs(7_000));
      if (submissionFault(req, errors, () => this.refuseCredentials(req, String(req.headers['api-key'] ?? '')))) return;
      const prompt = req.form.get('prompt');
      if (typeof prompt !== 'string' || prompt === '') return error(400, 'prompt: field required')(req);
      const speed = req.form.get('rendering_speed');
      if (req.steering.has('invalid') || (speed !== undefined && !SPEEDS.includes(String(speed)))) return error(400, `rendering_speed: '${String(speed ?? 'LUDICROUS')}' is not one of ${SPEEDS.join(', ')}`)(req);
      if (req.steering.has('refuse')) return error(422, 'Prompt or provided image failed the safety checks')(req);
      if (req.steering.has('fail')) return errors.failure(req);
      const n = Number(req.form.get('num_images') ?? 1) || 1;
      const seed = Number(req.form.get('seed') ?? 0) || 424_242;
      const resolution = String(req.form.get('resolution') ?? '1024x1024');
      const unsafe = req.steering.has('refuse-output');
      const data = Array.from({ length: n }, (_, i) => {
        const item = { prompt, resolution, is_image_safe: !unsafe, seed: seed + i, style_type: String(req.form?.get('style_type') ?? 'GENERAL') };
        if (unsafe) return item;
        const media = req.media.add('image/png', req.steering.get('size') ?? 8_192, MEDIA_TTL_MS, { broken: req.steering.has('mediafail') });
        return { ...item, url: req.mediaUrl(media.id) };
      });
      sendJson(req.res, 200, { created: new Date().toISOString(), data });
    },
  };
}
