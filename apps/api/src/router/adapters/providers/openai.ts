import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { synchronousJson } from '../exchange.js';
import { byStatus, credentialsRefused, invalidInput, jsonOf, outOfCredit, policyRefusal, providerBusy, saysPolicy, shortText } from '../outcomes.js';
import type { UpstreamResponse } from '../upstream-http.js';

// OpenAI Images: `POST /v1/images/generations` with a bearer key answers the finished result
// (`data[].b64_json`, `usage`). Its errors are `{error: {message, type, param, code}}`: the
// safety system's refusal is a 400 `moderation_blocked` (not billed), a bad value a 400
// `invalid_request_error` naming its `param`, an exhausted quota a 429 `insufficient_quota`.

// dall-e models answer URLs (`response_format: url`); gpt-image-1 answers base64, left as it is.
const MEDIA = { paths: [['data', '*', 'url']] };

interface OpenAiError {
  message?: unknown;
  type?: unknown;
  param?: unknown;
  code?: unknown;
}

export class OpenAiImagesAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'openai-images' as const;

  dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    return synchronousJson(model, input.raw, context.signal, { authorization: `Bearer ${this.key}` }, MEDIA, (res) => this.refusal(res));
  }

  private refusal(res: UpstreamResponse): GenerationResult {
    const error = ((jsonOf(res) as { error?: OpenAiError } | undefined)?.error ?? {}) as OpenAiError;
    const code = typeof error.code === 'string' ? error.code : undefined;
    const type = typeof error.type === 'string' ? error.type : undefined;
    const message = shortText(error.message);
    if (res.status === 401) return credentialsRefused(401);
    if (code === 'insufficient_quota' || type === 'insufficient_quota' || code === 'billing_hard_limit_reached') return outOfCredit();
    if (res.status === 429) return providerBusy();
    if (res.status === 400 && (code === 'moderation_blocked' || code === 'content_policy_violation' || saysPolicy(code))) return policyRefusal(message, code ?? 'moderation_blocked', false);
    if (res.status === 400 && type !== undefined) {
      const loc = typeof error.param === 'string' && error.param !== '' ? ['body', ...error.param.split('.')] : ['body'];
      return invalidInput([{ loc, msg: message ?? 'The provider rejected the input.', type: code ?? type }]);
    }
    return byStatus(res, message);
  }
}
