import { randomBytes } from 'node:crypto';
import { submissionFault, type NativeErrors } from '../faults.js';
import { mediaBytes } from '../media.js';
import { bearer, sendJson, sleep, type ProviderSim, type SimRequest } from '../sim-http.js';

// Stability AI (api.stability.ai): `POST /v2beta/stable-image/generate/{ultra|sd3}` takes
// multipart/form-data and, asked with `Accept: application/json`, answers `{image (base64),
// finish_reason, seed}`; `finish_reason: CONTENT_FILTERED` means the output was blurred by its
// moderation. Errors are `{id, name, errors: [...]}`: 400 bad_request, 403 content_moderation
// (the input; "you were not charged"), 402 payment_required, 429 rate_limit_exceeded.

const ENDPOINTS: Record<string, number> = { '/v2beta/stable-image/generate/ultra': 6_000, '/v2beta/stable-image/generate/sd3': 5_000 };
const RATIOS = ['16:9', '1:1', '21:9', '2:3', '3:2', '4:5', '5:4', '9:16', '9:21'];

function error(status: number, name: string, message: string) {
  return (req: SimRequest) => sendJson(req.res, status, { id: randomBytes(16).toString('hex'), name, errors: [message] });
}

const errors: NativeErrors = {
  busy: error(503, 'service_unavailable', 'The service is temporarily unavailable, please try again later.'),
  rateLimited: error(429, 'rate_limit_exceeded', 'You have exceeded the rate limit of 150 requests within a 10 second period, and have been timed out for 60 seconds.'),
  noCredit: error(402, 'payment_required', 'You lack sufficient credits to make this request. Please purchase more credits at https://platform.stability.ai/account/credits and try again.'),
  failure: error(500, 'internal_error', 'An unexpected server error has occurred, please try again later.'),
  gatewayTimeout: error(504, 'gateway_timeout', 'The request timed out.'),
};

export function stabilitySim(key: string): ProviderSim {
  return {
    name: 'stability',
    authorized: (req) => bearer(req.headers) === key,
    refuseCredentials: (req, given) => error(401, 'unauthorized', `Incorrect API key provided: ${given}`)(req),
    async handle(req) {
      const duration = req.method === 'POST' ? ENDPOINTS[req.path] : undefined;
      if (duration === undefined) return error(404, 'not_found', `No route for ${req.method} ${req.path}`)(req);
      if (!req.form) return error(400, 'bad_request', 'content-type: must be multipart/form-data')(req);
      if (!/application\/json/.test(String(req.headers.accept ?? ''))) return error(400, 'bad_request', 'accept: this simulator answers application/json only; send Accept: application/json')(req);
      await sleep(req.durationMs(duration));
      if (submissionFault(req, errors, () => this.refuseCredentials(req, bearer(req.headers)))) return;
      const prompt = req.form.get('prompt');
      if (req.steering.has('invalid')) return error(400, 'bad_request', 'seed: must be no greater than 4294967294')(req);
      if (typeof prompt !== 'string' || prompt.length === 0) return error(400, 'bad_request', 'prompt: is required')(req);
      const ratio = req.form.get('aspect_ratio');
      if (ratio !== undefined && !RATIOS.includes(String(ratio))) return error(400, 'bad_request', `aspect_ratio: must be one of ${RATIOS.join(', ')}`)(req);
      if (req.steering.has('refuse')) {
        return error(403, 'content_moderation', 'Your request was flagged by our content moderation system, as a result your request was denied and you were not charged.')(req);
      }
      if (req.steering.has('fail')) return errors.failure(req);
      const format = String(req.form.get('output_format') ?? 'png');
      const seed = Number(req.form.get('seed') ?? 0) || 1_029_384_756;
      const image = mediaBytes({ id: `stability-${seed}-${prompt.length}`, contentType: `image/${format}` }, 0, req.steering.get('size') ?? 4_096).toString('base64');
      sendJson(req.res, 200, { image, finish_reason: req.steering.has('refuse-output') ? 'CONTENT_FILTERED' : 'SUCCESS', seed });
    },
  };
}
