import { randomUUID } from 'node:crypto';
import { submissionFault, type NativeErrors } from '../faults.js';
import { mediaBytes } from '../media.js';
import { bearer, sendJson, sleep, type ProviderSim, type SimRequest } from '../sim-http.js';

// Recraft (external.api.recraft.ai): `POST /v1/images/generations` with a bearer key answers at
// once with `{created, credits, data: [{image_id, url}]}` (or `b64_json` with
// `response_format: b64_json`). Errors are `{code, message}`.

const MEDIA_TTL_MS = 24 * 3600_000;

function error(status: number, code: string, message: string) {
  return (req: SimRequest) => sendJson(req.res, status, { code, message });
}

const errors: NativeErrors = {
  busy: error(503, 'service_unavailable', 'Service is temporarily unavailable'),
  rateLimited: error(429, 'too_many_requests', 'Rate limit exceeded: 100 images per minute'),
  noCredit: error(402, 'not_enough_credits', 'Not enough API units on the balance'),
  failure: error(500, 'internal_error', 'Internal server error'),
  gatewayTimeout: error(504, 'gateway_timeout', 'Gateway timeout'),
};

export function recraftSim(key: string): ProviderSim {
  return {
    name: 'recraft',
    authorized: (req) => bearer(req.headers) === key,
    refuseCredentials: (req, given) => error(401, 'not_authenticated', `Invalid token: ${given}`)(req),
    async handle(req) {
      if (req.method !== 'POST' || req.path !== '/v1/images/generations') return error(404, 'not_found', 'Not found')(req);
      const body = (req.json ?? {}) as { prompt?: unknown; n?: unknown; response_format?: unknown; style?: unknown };
      await sleep(req.durationMs(6_000));
      if (submissionFault(req, errors, () => this.refuseCredentials(req, bearer(req.headers)))) return;
      if (req.steering.has('invalid')) return error(400, 'invalid_style_for_model', `style '${String(body.style ?? 'any')}' is not supported by the model recraftv3 with this substyle`)(req);
      if (typeof body.prompt !== 'string' || body.prompt === '') return error(400, 'invalid_prompt', 'prompt must be a non-empty string')(req);
      if (req.steering.has('refuse') || req.steering.has('refuse-output')) return error(400, 'inappropriate_content', 'The prompt was flagged by content moderation')(req);
      if (req.steering.has('fail')) return errors.failure(req);
      const n = typeof body.n === 'number' ? body.n : 1;
      const size = req.steering.get('size') ?? 8_192;
      const data = Array.from({ length: n }, () => {
        const image_id = randomUUID();
        if (body.response_format === 'b64_json') return { image_id, b64_json: mediaBytes({ id: image_id, contentType: 'image/webp' }, 0, size).toString('base64') };
        const media = req.media.add('image/webp', size, MEDIA_TTL_MS, { broken: req.steering.has('mediafail') });
        return { image_id, url: req.mediaUrl(media.id) };
      });
      sendJson(req.res, 200, { created: Math.floor(Date.now() / 1000), credits: 40 * n, data });
    },
  };
}
