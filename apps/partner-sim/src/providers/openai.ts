import { randomUUID } from 'node:crypto';
import { submissionFault, type NativeErrors } from '../faults.js';
import { mediaBytes } from '../media.js';
import { bearer, sendJson, sleep, type ProviderSim, type SimRequest } from '../sim-http.js';

// OpenAI Images (api.openai.com): `POST /v1/images/generations` with a bearer key answers at once
// with `{created, data: [{b64_json}], usage, ...}`. Errors are `{error: {message, type, param,
// code}}`: a refusal by the safety system is a 400 with code `moderation_blocked`, a bad value a
// 400 `invalid_request_error` naming its `param`, an exhausted quota a 429 `insufficient_quota`.

const SIZES = ['1024x1024', '1536x1024', '1024x1536', 'auto'];

function error(status: number, message: string, type: string, code: string | null, param: string | null = null) {
  return (req: SimRequest, headers: Record<string, string> = {}) => sendJson(req.res, status, { error: { message, type, param, code } }, headers);
}

const errors: NativeErrors = {
  busy: error(503, 'The engine is currently overloaded, please try again later.', 'server_error', null),
  rateLimited: (req) => error(429, 'Rate limit reached for gpt-image-1 on images per minute (IPM): Limit 5, Used 5, Requested 1.', 'requests', 'rate_limit_exceeded')(req, { 'retry-after': '12' }),
  noCredit: error(429, 'You exceeded your current quota, please check your plan and billing details.', 'insufficient_quota', 'insufficient_quota'),
  failure: error(500, 'The server had an error while processing your request. Sorry about that!', 'server_error', null),
  gatewayTimeout: error(504, 'Gateway timeout.', 'server_error', null),
};

export function openaiSim(key: string): ProviderSim {
  return {
    name: 'openai',
    authorized: (req) => bearer(req.headers) === key,
    refuseCredentials: (req, given) => error(401, `Incorrect API key provided: ${given}. You can find your API key at https://platform.openai.com/account/api-keys.`, 'invalid_request_error', 'invalid_api_key')(req),
    async handle(req) {
      if (req.method !== 'POST' || req.path !== '/v1/images/generations') return error(404, `Invalid URL (${req.method} ${req.path})`, 'invalid_request_error', null)(req);
      const body = (req.json ?? {}) as { model?: unknown; size?: unknown; n?: unknown; output_format?: unknown; quality?: unknown; background?: unknown; prompt?: unknown };
      await sleep(req.durationMs(12_000));
      if (submissionFault(req, errors, () => this.refuseCredentials(req, bearer(req.headers)))) return;
      const requestId = `req_${randomUUID().replace(/-/g, '')}`;
      if (req.steering.has('refuse') || req.steering.has('refuse-output')) {
        return error(400, `Your request was rejected by the safety system. If you believe this is an error, contact us at help.openai.com and include the request ID ${requestId}.`, 'image_generation_user_error', 'moderation_blocked')(req);
      }
      if (req.steering.has('invalid') || (body.size !== undefined && !SIZES.includes(String(body.size)))) {
        return error(400, `Invalid value: '${String(body.size ?? 'huge')}'. Supported values are: '1024x1024', '1024x1536', '1536x1024', and 'auto'.`, 'invalid_request_error', 'invalid_value', 'size')(req);
      }
      if (body.model !== 'gpt-image-1') return error(400, `The model '${String(body.model)}' does not exist.`, 'invalid_request_error', 'model_not_found', 'model')(req);
      if (req.steering.has('fail')) return errors.failure(req);
      const n = typeof body.n === 'number' ? body.n : 1;
      const format = typeof body.output_format === 'string' ? body.output_format : 'png';
      const size = req.steering.get('size') ?? 1_536;
      const data = Array.from({ length: n }, (_, i) => ({ b64_json: mediaBytes({ id: `${requestId}-${i}`, contentType: `image/${format}` }, 0, size).toString('base64') }));
      const promptTokens = typeof body.prompt === 'string' ? Math.ceil(body.prompt.length / 4) : 0;
      sendJson(req.res, 200, {
        created: Math.floor(Date.now() / 1000),
        background: body.background === 'transparent' ? 'transparent' : 'opaque',
        data,
        output_format: format,
        quality: typeof body.quality === 'string' && body.quality !== 'auto' ? body.quality : 'medium',
        size: body.size === undefined || body.size === 'auto' ? '1024x1024' : body.size,
        usage: { input_tokens: promptTokens, input_tokens_details: { image_tokens: 0, text_tokens: promptTokens }, output_tokens: 1056 * n, total_tokens: promptTokens + 1056 * n },
      });
    },
  };
}
