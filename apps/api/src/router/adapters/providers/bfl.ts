import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult, sameProvider } from '../exchange.js';
import { byStatus, jsonOf, jsonSuccess, lostTrack, outOfCredit, passThroughValidation, policyRefusal, providerBusy, providerFailure, shortText, uninterpretable, validationEntries } from '../outcomes.js';
import { pollUntilSettled } from '../polling.js';
import { upstreamRequest, type UpstreamResponse } from '../upstream-http.js';

// Black Forest Labs: `POST {model endpoint}` with `x-key` → `{id, polling_url}`; the polling URL
// (the handle a keyed retry collects by) is asked until `status` is Ready (the result's
// `result.sample` is re-hosted), Request Moderated (the input: not generated), Content Moderated
// (the output), Error or Task not found. Its 422s are FastAPI's validation body, passed through.

const MEDIA = { paths: [['result', 'sample']] };

interface Status {
  status?: unknown;
  details?: { 'Moderation Reasons'?: unknown; error?: unknown } | null;
}

export class BflAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'bfl' as const;

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: { 'x-key': this.key }, body: input.raw, signal: context.signal });
    if (isResult(res)) return res;
    if (res.status < 200 || res.status >= 300) return this.refusal(res);
    const doc = jsonOf(res) as { id?: unknown; polling_url?: unknown } | undefined;
    if (!doc || typeof doc.id !== 'string' || doc.id === '') return uninterpretable('an acceptance without a task id');
    const pollingUrl = typeof doc.polling_url === 'string' ? doc.polling_url : new URL(`get_result?id=${encodeURIComponent(doc.id)}`, model.upstreamUrl).toString();
    // The key goes only to the provider's own hosts.
    if (!sameProvider(pollingUrl, model.upstreamUrl) || pollingUrl.length > 2048) return uninterpretable('a polling URL outside its own hosts');
    context.onHandle(pollingUrl);
    return this.follow(model, pollingUrl, context.signal, true);
  }

  collect(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult> {
    if (!sameProvider(handle, model.upstreamUrl)) return Promise.resolve(uninterpretable('a polling URL outside its own hosts'));
    return this.follow(model, handle, signal, false);
  }

  private follow(model: UpstreamModel, pollingUrl: string, signal: AbortSignal, waitFirst: boolean): Promise<GenerationResult> {
    return pollUntilSettled({
      intervalMs: model.pollIntervalMs,
      signal,
      waitFirst,
      ask: () => upstreamRequest(pollingUrl, { method: 'GET', headers: { 'x-key': this.key }, signal }),
      settle: (res) => this.settle(res, model),
    });
  }

  private settle(res: UpstreamResponse, model: UpstreamModel): GenerationResult | null {
    if (res.status === 404) return lostTrack();
    if (res.status < 200 || res.status >= 300) return this.refusal(res);
    const doc = jsonOf(res) as Status | undefined;
    if (!doc || typeof doc !== 'object') return uninterpretable('a status');
    const reasons = Array.isArray(doc.details?.['Moderation Reasons']) ? `Moderated: ${(doc.details['Moderation Reasons'] as unknown[]).join(', ')}` : undefined;
    switch (doc.status) {
      case 'Pending':
        return null;
      case 'Ready':
        return jsonSuccess(res, model, MEDIA);
      case 'Request Moderated':
        return policyRefusal(shortText(reasons) ?? 'The provider refused the request on content-policy grounds.', 'Request Moderated', false);
      case 'Content Moderated':
        return policyRefusal(shortText(reasons) ?? 'The provider withheld the generated image on content-policy grounds.', 'Content Moderated', true);
      case 'Error':
        return providerFailure('status Error', shortText(doc.details?.error));
      case 'Task not found':
        return lostTrack();
      default:
        return uninterpretable('a generation state');
    }
  }

  private refusal(res: UpstreamResponse): GenerationResult {
    const doc = jsonOf(res) as { detail?: unknown } | undefined;
    if (res.status === 422) {
      const entries = validationEntries(doc);
      return entries ? passThroughValidation(res, entries) : uninterpretable('a rejection');
    }
    if (res.status === 402) return outOfCredit();
    if (res.status === 429) return providerBusy();
    return byStatus(res, typeof doc?.detail === 'string' ? doc.detail : undefined);
  }
}
