import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { synchronousJson } from '../exchange.js';
import { byStatus, invalidInput, jsonOf, outOfCredit, policyRefusal, providerBusy, saysPolicy, shortText } from '../outcomes.js';
import type { UpstreamResponse } from '../upstream-http.js';

// Recraft: `POST /v1/images/generations` with a bearer key answers the finished result,
// `{created, credits, data: [{image_id, url}]}`; the URLs are re-hosted. Errors are `{code, message}`.

const MEDIA = { paths: [['data', '*', 'url']] };

export class RecraftAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'recraft' as const;

  dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    return synchronousJson(model, input.raw, context.signal, { authorization: `Bearer ${this.key}` }, MEDIA, (res) => this.refusal(res));
  }

  private refusal(res: UpstreamResponse): GenerationResult {
    const doc = jsonOf(res) as { code?: unknown; message?: unknown } | undefined;
    const code = typeof doc?.code === 'string' ? doc.code : undefined;
    const message = shortText(doc?.message);
    if (res.status === 402 || code === 'not_enough_credits') return outOfCredit();
    if (res.status === 429) return providerBusy();
    if ((res.status === 400 || res.status === 422) && code !== undefined) {
      if (saysPolicy(code) || saysPolicy(message)) return policyRefusal(message, code, false);
      return invalidInput([{ loc: ['body'], msg: message ?? 'The provider rejected the input.', type: code }]);
    }
    return byStatus(res, message);
  }
}
