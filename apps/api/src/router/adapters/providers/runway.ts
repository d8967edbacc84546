import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult } from '../exchange.js';
import { byStatus, invalidInput, jsonOf, jsonSuccess, lostTrack, outOfCredit, policyRefusal, providerBusy, providerFailure, saysPolicy, shortText, uninterpretable } from '../outcomes.js';
import { pollUntilSettled } from '../polling.js';
import { upstreamRequest, type UpstreamResponse } from '../upstream-http.js';

// Runway: every request carries a bearer key and the API version it was written against. `POST
// /v1/image_to_video` → `{id}`; `GET /v1/tasks/{id}` until `status` is SUCCEEDED (`output` URLs
// are re-hosted), FAILED or CANCELLED, through PENDING, THROTTLED (waiting for the account's
// concurrency: still pending, not an error) and RUNNING (`progress`). A failure code SAFETY.INPUT.*
// or SAFETY.OUTPUT.* is its content moderation (Runway refunds failed tasks).

export const RUNWAY_API_VERSION = '2024-11-06';
const MEDIA = { paths: [['output', '*']] };
const PENDING = new Set(['PENDING', 'THROTTLED', 'RUNNING']);

interface Task {
  status?: unknown;
  failure?: unknown;
  failureCode?: unknown;
}

export class RunwayAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'runway' as const;

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.key}`, 'x-runway-version': RUNWAY_API_VERSION };
  }

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: this.headers(), body: input.raw, signal: context.signal });
    if (isResult(res)) return res;
    if (res.status < 200 || res.status >= 300) return refusal(res);
    const id = (jsonOf(res) as { id?: unknown } | undefined)?.id;
    if (typeof id !== 'string' || id === '' || id.length > 256) return uninterpretable('an acceptance without a task id');
    context.onHandle(id);
    return this.follow(model, id, context.signal, true);
  }

  collect(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult> {
    return this.follow(model, handle, signal, false);
  }

  private follow(model: UpstreamModel, id: string, signal: AbortSignal, waitFirst: boolean): Promise<GenerationResult> {
    const url = new URL(`tasks/${encodeURIComponent(id)}`, model.upstreamUrl).toString();
    return pollUntilSettled({
      intervalMs: model.pollIntervalMs,
      signal,
      waitFirst,
      ask: () => upstreamRequest(url, { method: 'GET', headers: this.headers(), signal }),
      settle: (res) => this.settle(res, model),
    });
  }

  private settle(res: UpstreamResponse, model: UpstreamModel): GenerationResult | null {
    if (res.status === 404) return lostTrack();
    if (res.status < 200 || res.status >= 300) return refusal(res);
    const task = jsonOf(res) as Task | undefined;
    const status = typeof task?.status === 'string' ? task.status : '';
    if (PENDING.has(status)) return null;
    const failure = shortText(task?.failure);
    const code = typeof task?.failureCode === 'string' ? task.failureCode : '';
    switch (status) {
      case 'SUCCEEDED':
        return jsonSuccess(res, model, MEDIA);
      case 'FAILED':
        if (code.startsWith('SAFETY.')) return policyRefusal(failure, code, code.startsWith('SAFETY.OUTPUT'));
        return providerFailure(`task failed${code ? ` (${code})` : ''}`, failure);
      case 'CANCELLED':
        return providerFailure('task cancelled', failure);
      default:
        return uninterpretable('a task state');
    }
  }
}

function refusal(res: UpstreamResponse): GenerationResult {
  const doc = jsonOf(res) as { error?: unknown; issues?: unknown } | undefined;
  const error = shortText(doc?.error);
  if (res.status === 402 || (res.status === 400 && /credit/i.test(error ?? ''))) return outOfCredit();
  if (res.status === 429) return providerBusy();
  if (res.status === 400 && Array.isArray(doc?.issues) && doc.issues.length > 0) {
    return invalidInput(
      doc.issues.map((issue: { path?: unknown; message?: unknown; code?: unknown }) => ({
        loc: ['body', ...(Array.isArray(issue?.path) ? issue.path.filter((p): p is string | number => typeof p === 'string' || typeof p === 'number') : [])],
        msg: shortText(issue?.message) ?? 'The provider rejected the input.',
        type: typeof issue?.code === 'string' ? issue.code : 'invalid',
      })),
    );
  }
  if (res.status === 400 && error) return saysPolicy(error) ? policyRefusal(error, 'moderation', false) : invalidInput([{ loc: ['body'], msg: error, type: 'bad_request' }]);
  return byStatus(res, error);
}
