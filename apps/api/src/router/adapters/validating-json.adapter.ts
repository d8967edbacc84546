import { parseJson, upstreamRequest } from './upstream-http.js';
import type { DispatchContext, GenerationResult, ProviderAdapter, UpstreamModel } from './adapter.js';
import { errorResult } from './adapter.js';
import { failureResult, isPolicyCode, successOrGarbage, transportResult, validationEntries } from './responses.js';
import { isJsonContentType } from '../../http/json-body.js';

/**
 * Synchronous partners that check the input themselves and answer 422 in the validation shape
 * (`{detail: [{loc, msg, type, ctx, input}]}`). Those bodies reach the caller byte for byte, with
 * types the router has never heard of; an entry typed as a policy refusal makes it one.
 */
export class ValidatingJsonAdapter implements ProviderAdapter {
  readonly kind = 'validating-json' as const;

  async dispatch(model: UpstreamModel, body: Buffer, context: DispatchContext): Promise<GenerationResult> {
    try {
      const res = await upstreamRequest(model.upstreamUrl, { method: 'POST', body, signal: context.signal });
      if (res.status >= 200 && res.status < 300) return successOrGarbage(res, model);
      if (res.status !== 422) return failureResult(res);
      const entries = isJsonContentType(res.contentType) ? validationEntries(parseJson(res.body)) : null;
      if (!entries) return errorResult('provider_error', 'The provider rejected the input with an answer the router cannot interpret.');
      const bucket = entries.some((e) => isPolicyCode(e.type)) ? 'content_policy_violation' : 'invalid_input';
      return { bucket, status: 422, contentType: res.contentType, body: res.body };
    } catch (err) {
      return transportResult(err);
    }
  }
}
