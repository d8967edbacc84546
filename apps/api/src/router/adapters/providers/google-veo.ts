import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult } from '../exchange.js';
import { credentialsRefused, invalidInput, jsonOf, jsonSuccess, lostTrack, outOfCredit, policyRefusal, providerBusy, providerFailure, providerTimeout, saysPolicy, shortText, uninterpretable } from '../outcomes.js';
import { pollUntilSettled } from '../polling.js';
import { upstreamRequest, type UpstreamResponse } from '../upstream-http.js';

// Google's Gemini API for Veo, a long-running operation: `POST
// /v1beta/models/{model}:predictLongRunning` (key in `x-goog-api-key`) → `{name}`; `GET
// /v1beta/{name}` until `done`. Done, it holds `response` (the videos' file URIs, re-hosted with
// the key, which they need) or `error`. Videos its safety filters withheld come back done, with
// `raiMediaFilteredCount` and the reasons and no video: a content-policy refusal (not billed).
// Errors are `{error: {code, message, status, details}}`.

const MEDIA_PATH = ['response', 'generateVideoResponse', 'generatedSamples', '*', 'video', 'uri'];
const OPERATION = /^models\/[a-z0-9.-]+\/operations\/[A-Za-z0-9_-]+$/;

interface GoogleError {
  code?: unknown;
  message?: unknown;
  status?: unknown;
  details?: unknown;
}

interface Operation {
  name?: unknown;
  done?: unknown;
  error?: GoogleError;
  response?: { generateVideoResponse?: { generatedSamples?: unknown; raiMediaFilteredCount?: unknown; raiMediaFilteredReasons?: unknown } };
}

export class GoogleVeoAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'google-veo' as const;

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: { 'x-goog-api-key': this.key }, body: input.raw, signal: context.signal });
    if (isResult(res)) return res;
    if (res.status < 200 || res.status >= 300) return refusal(res);
    const name = (jsonOf(res) as Operation | undefined)?.name;
    if (typeof name !== 'string' || !OPERATION.test(name)) return uninterpretable('an operation without a name');
    context.onHandle(name);
    return this.follow(model, name, context.signal, true);
  }

  collect(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult> {
    if (!OPERATION.test(handle)) return Promise.resolve(uninterpretable('an operation name'));
    return this.follow(model, handle, signal, false);
  }

  private follow(model: UpstreamModel, name: string, signal: AbortSignal, waitFirst: boolean): Promise<GenerationResult> {
    // The operation lives under the API version's root: .../v1beta/models/x:predictLongRunning -> .../v1beta/{name}.
    const root = model.upstreamUrl.slice(0, model.upstreamUrl.indexOf('/models/') + 1);
    const url = `${root}${name}`;
    return pollUntilSettled({
      intervalMs: model.pollIntervalMs,
      signal,
      waitFirst,
      ask: () => upstreamRequest(url, { method: 'GET', headers: { 'x-goog-api-key': this.key }, signal }),
      settle: (res) => (res.status === 404 ? lostTrack() : res.status >= 300 ? refusal(res) : this.settle(res, model)),
    });
  }

  private settle(res: UpstreamResponse, model: UpstreamModel): GenerationResult | null {
    const op = jsonOf(res) as Operation | undefined;
    if (!op || typeof op !== 'object') return uninterpretable('an operation');
    if (op.done !== true) return null;
    if (op.error) return providerFailure(`operation error ${String(op.error.code ?? '')}`.trim(), shortText(op.error.message));
    const video = op.response?.generateVideoResponse;
    const samples = Array.isArray(video?.generatedSamples) ? video.generatedSamples : [];
    if (samples.length > 0) return jsonSuccess(res, model, { paths: [MEDIA_PATH], headers: { 'x-goog-api-key': this.key } });
    if (typeof video?.raiMediaFilteredCount === 'number' && video.raiMediaFilteredCount > 0) {
      const reasons = Array.isArray(video.raiMediaFilteredReasons) ? video.raiMediaFilteredReasons.join(' ') : undefined;
      return policyRefusal(shortText(reasons), 'raiMediaFiltered', false);
    }
    return uninterpretable('a finished operation without videos');
  }
}

function refusal(res: UpstreamResponse): GenerationResult {
  const error = ((jsonOf(res) as { error?: GoogleError } | undefined)?.error ?? {}) as GoogleError;
  const status = typeof error.status === 'string' ? error.status : '';
  const message = shortText(error.message);
  const details = Array.isArray(error.details) ? (error.details as { reason?: unknown; fieldViolations?: unknown }[]) : [];
  if (details.some((d) => d?.reason === 'API_KEY_INVALID') || status === 'UNAUTHENTICATED' || status === 'PERMISSION_DENIED') return credentialsRefused(res.status);
  if (status === 'RESOURCE_EXHAUSTED' || res.status === 429) return /quota|billing/i.test(message ?? '') ? outOfCredit() : providerBusy();
  if (status === 'UNAVAILABLE' || res.status === 503) return providerBusy();
  if (status === 'DEADLINE_EXCEEDED' || res.status === 504) return providerTimeout();
  if (status === 'INVALID_ARGUMENT' || res.status === 400) {
    if (saysPolicy(message)) return policyRefusal(message, status || 'INVALID_ARGUMENT', false);
    const violations = details.flatMap((d) => (Array.isArray(d?.fieldViolations) ? (d.fieldViolations as { field?: unknown; description?: unknown }[]) : []));
    if (violations.length > 0) {
      return invalidInput(violations.map((v) => ({ loc: ['body', ...String(v.field ?? '').split('.').filter(Boolean)], msg: shortText(v.description) ?? message ?? 'Invalid value.', type: status || 'INVALID_ARGUMENT' })));
    }
    return invalidInput([{ loc: ['body'], msg: message ?? 'The provider rejected the input.', type: status || 'INVALID_ARGUMENT' }]);
  }
  if (res.status === 401 || res.status === 403) return credentialsRefused(res.status);
  return providerFailure(status || `HTTP ${res.status}`, message);
}
