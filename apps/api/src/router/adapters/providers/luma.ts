import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult } from '../exchange.js';
import { byStatus, invalidInput, jsonOf, jsonSuccess, lostTrack, outOfCredit, passThroughValidation, policyRefusal, providerBusy, providerFailure, saysPolicy, shortText, uninterpretable, validationEntries } from '../outcomes.js';
import { pollUntilSettled } from '../polling.js';
import { upstreamRequest, type UpstreamResponse } from '../upstream-http.js';

// Luma Dream Machine: `POST /dream-machine/v1/generations` (bearer) answers the generation,
// `{id, state}`; `GET .../generations/{id}` until `state` is completed (`assets` URLs are
// re-hosted) or failed (`failure_reason`), through queued and dreaming. Errors are FastAPI's:
// `{detail: "..."}`, or a 422 `{detail: [...]}` passed through.

const MEDIA = { paths: [['assets', 'video'], ['assets', 'image'], ['assets', 'progress_video']] };

interface Generation {
  id?: unknown;
  state?: unknown;
  failure_reason?: unknown;
}

export class LumaAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'luma' as const;

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: { authorization: `Bearer ${this.key}` }, body: input.raw, signal: context.signal });
    if (isResult(res)) return res;
    if (res.status < 200 || res.status >= 300) return refusal(res);
    const doc = jsonOf(res) as Generation | undefined;
    if (typeof doc?.id !== 'string' || doc.id === '' || doc.id.length > 256) return uninterpretable('an acceptance without a generation id');
    context.onHandle(doc.id);
    return this.settle(res, model) ?? this.follow(model, doc.id, context.signal, true);
  }

  collect(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult> {
    return this.follow(model, handle, signal, false);
  }

  private follow(model: UpstreamModel, id: string, signal: AbortSignal, waitFirst: boolean): Promise<GenerationResult> {
    const url = `${model.upstreamUrl.replace(/\/+$/, '')}/${encodeURIComponent(id)}`;
    return pollUntilSettled({
      intervalMs: model.pollIntervalMs,
      signal,
      waitFirst,
      ask: () => upstreamRequest(url, { method: 'GET', headers: { authorization: `Bearer ${this.key}` }, signal }),
      settle: (res) => (res.status === 404 ? lostTrack() : res.status >= 300 ? refusal(res) : this.settle(res, model)),
    });
  }

  private settle(res: UpstreamResponse, model: UpstreamModel): GenerationResult | null {
    const doc = jsonOf(res) as Generation | undefined;
    const reason = shortText(doc?.failure_reason);
    switch (doc?.state) {
      case 'queued':
      case 'dreaming':
        return null;
      case 'completed':
        return jsonSuccess(res, model, MEDIA);
      case 'failed':
        return saysPolicy(reason) ? policyRefusal(reason, 'generation_failed_moderation', true) : providerFailure('generation failed', reason);
      default:
        return uninterpretable('a generation state');
    }
  }
}

function refusal(res: UpstreamResponse): GenerationResult {
  const doc = jsonOf(res) as { detail?: unknown } | undefined;
  if (res.status === 422) {
    const entries = validationEntries(doc);
    if (entries) return passThroughValidation(res, entries);
  }
  const detail = shortText(doc?.detail);
  if (res.status === 402) return outOfCredit();
  if (res.status === 429) return providerBusy();
  if ((res.status === 400 || res.status === 422) && detail) {
    return saysPolicy(detail) ? policyRefusal(detail, 'prompt_moderation', false) : invalidInput([{ loc: ['body'], msg: detail, type: 'bad_request' }]);
  }
  return byStatus(res, detail);
}
