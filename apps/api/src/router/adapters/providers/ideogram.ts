import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult } from '../exchange.js';
import { formBody } from '../multipart.js';
import { byStatus, invalidInput, jsonOf, jsonSuccess, outOfCredit, policyRefusal, providerBusy, saysPolicy, shortText, uninterpretable } from '../outcomes.js';
import type { UpstreamResponse } from '../upstream-http.js';

// Ideogram: `POST /v1/ideogram-v3/generate` takes multipart/form-data (the caller's JSON fields;
// reference images as data URIs become file parts) with an `Api-Key` header and answers
// `{created, data: [{url, is_image_safe, ...}]}`. An image its checks flag comes back with
// `is_image_safe: false` and no URL (generated, so billed); when none is safe the call is a
// content-policy refusal. A prompt that fails its safety checks is a 422 `{error}` (not billed).

const MEDIA = { paths: [['data', '*', 'url']] };
const FILE_FIELDS = new Set(['character_reference_images', 'character_reference_images_mask', 'style_reference_images']);

export class IdeogramAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'ideogram' as const;

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const form = await formBody(input.parsed as Record<string, unknown>, FILE_FIELDS);
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: { 'api-key': this.key, 'content-type': form.contentType }, body: form.body, signal: context.signal });
    if (isResult(res)) return res;
    if (res.status < 200 || res.status >= 300) return this.refusal(res);
    const images = (jsonOf(res) as { data?: unknown } | undefined)?.data;
    if (!Array.isArray(images) || images.length === 0) return uninterpretable();
    if (images.every((i) => (i as { is_image_safe?: unknown })?.is_image_safe === false)) {
      return policyRefusal('The provider withheld every generated image as unsafe.', 'is_image_safe', true);
    }
    return jsonSuccess(res, model, MEDIA);
  }

  private refusal(res: UpstreamResponse): GenerationResult {
    const error = shortText((jsonOf(res) as { error?: unknown } | undefined)?.error);
    if (res.status === 402) return outOfCredit();
    if (res.status === 429) return providerBusy();
    if (res.status === 422 && saysPolicy(error)) return policyRefusal(error, 'safety_check_failed', false);
    if ((res.status === 400 || res.status === 422) && error) {
      const field = /^([a-z_][a-z0-9_]*): /i.exec(error)?.[1];
      return invalidInput([{ loc: field ? ['body', field] : ['body'], msg: field ? error.slice(field.length + 2) : error, type: 'bad_request' }]);
    }
    return byStatus(res, error);
  }
}
