import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult } from '../exchange.js';
import { formBody } from '../multipart.js';
import { byStatus, invalidInput, jsonOf, jsonSuccess, outOfCredit, policyRefusal, providerBusy, shortText, uninterpretable } from '../outcomes.js';
import type { UpstreamResponse } from '../upstream-http.js';

// Stability AI: `POST /v2beta/stable-image/generate/{ultra|sd3}` takes multipart/form-data (the
// caller's JSON fields; `image` as a data URI becomes a file part) and, with `Accept:
// application/json`, answers `{image, finish_reason, seed}`. `finish_reason: CONTENT_FILTERED`
// is its output moderation (the image came back blurred, and billed); a 403 `content_moderation`
// refuses the input ("you were not charged"). Errors are `{id, name, errors: [...]}`.

const FILE_FIELDS = new Set(['image']);

export class StabilityAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'stability' as const;

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const form = await formBody(input.parsed as Record<string, unknown>, FILE_FIELDS);
    const res = await exchange(model.upstreamUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.key}`, accept: 'application/json', 'content-type': form.contentType },
      body: form.body,
      signal: context.signal,
    });
    if (isResult(res)) return res;
    if (res.status < 200 || res.status >= 300) return this.refusal(res);
    const doc = jsonOf(res) as { image?: unknown; finish_reason?: unknown } | undefined;
    if (doc?.finish_reason === 'CONTENT_FILTERED') return policyRefusal('The provider blurred the generated image: it violated its content moderation policy.', 'CONTENT_FILTERED', true);
    if (doc?.finish_reason !== 'SUCCESS' || typeof doc.image !== 'string') return uninterpretable();
    return jsonSuccess(res, model);
  }

  private refusal(res: UpstreamResponse): GenerationResult {
    const doc = jsonOf(res) as { name?: unknown; errors?: unknown } | undefined;
    const name = typeof doc?.name === 'string' ? doc.name : undefined;
    const messages = Array.isArray(doc?.errors) ? doc.errors.filter((e): e is string => typeof e === 'string') : [];
    if (res.status === 403 && name === 'content_moderation') return policyRefusal(shortText(messages.join(' ')), name, false);
    if (res.status === 402) return outOfCredit();
    if (res.status === 429) return providerBusy();
    if ((res.status === 400 || res.status === 413 || res.status === 422) && name !== undefined) {
      // Its messages name the field first: "seed: must be no greater than 4294967294".
      const entries = (messages.length > 0 ? messages : ['The provider rejected the input.']).map((m) => {
        const field = /^([a-z_][a-z0-9_]*): /i.exec(m)?.[1];
        return { loc: field ? ['body', field] : ['body'], msg: shortText(field ? m.slice(field.length + 2) : m)!, type: name };
      });
      return invalidInput(entries);
    }
    return byStatus(res, messages[0]);
  }
}
