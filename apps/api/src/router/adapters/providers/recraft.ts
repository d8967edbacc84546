import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { exchange, isResult } from '../exchange.js';
import { byStatus, invalidInput, jsonOf, jsonSuccess, outOfCredit, policyRefusal, providerBusy, saysPolicy, shortText } from '../outcomes.js';
import type { UpstreamResponse } from '../upstream-http.js';

// Recraft: `POST /v1/images/generations` with a bearer key answers the finished result,
// `{created, credits, data: [{image_id, url}]}`; the URLs are re-hosted. Errors are `{code, message}`.

const MEDIA = { paths: [['data', '*', 'url']] };

export class RecraftAdapter implements ProviderAdapter {
  readonly kind = 'recraft' as const;

  constructor(private readonly key: string) {}

  configured(): boolean {
    return this.key !== '';
  }

  secrets(): string[] {
    return [this.key];
  }

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: { authorization: `Bearer ${this.key}` }, body: input.raw, signal: context.signal });
    if (isResult(res)) return res;
    if (res.status >= 200 && res.status < 300) return jsonSuccess(res, model, MEDIA);
    return this.refusal(res);
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
