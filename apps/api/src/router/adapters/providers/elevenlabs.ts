import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult } from '../exchange.js';
import { binarySuccess, byStatus, credentialsRefused, invalidInput, jsonOf, outOfCredit, passThroughValidation, policyRefusal, providerBusy, saysPolicy, shortText, validationEntries } from '../outcomes.js';
import type { UpstreamResponse } from '../upstream-http.js';

// ElevenLabs text to speech: `POST /v1/text-to-speech/{voice_id}?output_format=...` with an
// `xi-api-key` header answers the audio itself, passed on with its media type. The voice and the
// format are the native call's path and query: here they travel as the body's `voice_id` and
// `output_format`, and the rest of the body is the native body. Errors are `{detail: {status,
// message}}` (a used-up quota is a 401 `quota_exceeded`), validation FastAPI's 422, passed through.

const BUSY = new Set(['too_many_concurrent_requests', 'system_busy', 'rate_limit_exceeded']);

export class ElevenLabsAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'elevenlabs' as const;

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const { voice_id: voice, output_format: format, ...body } = input.parsed as { voice_id: string; output_format?: string };
    const query = format === undefined ? '' : `?output_format=${encodeURIComponent(format)}`;
    const url = `${model.upstreamUrl.replace(/\/+$/, '')}/${encodeURIComponent(voice)}${query}`;
    const res = await exchange(url, { method: 'POST', headers: { 'xi-api-key': this.key, accept: 'audio/*' }, body: Buffer.from(JSON.stringify(body)), signal: context.signal });
    if (isResult(res)) return res;
    if (res.status >= 200 && res.status < 300) return binarySuccess(res, model);
    return refusal(res);
  }
}

function refusal(res: UpstreamResponse): GenerationResult {
  const doc = jsonOf(res) as { detail?: unknown } | undefined;
  if (res.status === 422) {
    const entries = validationEntries(doc);
    if (entries) return passThroughValidation(res, entries);
  }
  const detail = (doc?.detail && typeof doc.detail === 'object' ? doc.detail : {}) as { status?: unknown; message?: unknown };
  const status = typeof detail.status === 'string' ? detail.status : undefined;
  const message = shortText(detail.message);
  if (status === 'quota_exceeded' || status === 'payment_required') return outOfCredit();
  if (status === 'invalid_api_key' || status === 'missing_permissions') return credentialsRefused(res.status);
  if ((status && BUSY.has(status)) || res.status === 429) return providerBusy();
  if (status && (saysPolicy(status) || saysPolicy(message))) return policyRefusal(message, status, false);
  if (status === 'voice_not_found') return invalidInput([{ loc: ['body', 'voice_id'], msg: message ?? 'No such voice.', type: status }]);
  if ((res.status === 400 || res.status === 404 || res.status === 422) && status) return invalidInput([{ loc: ['body'], msg: message ?? 'The provider rejected the input.', type: status }]);
  return byStatus(res, message);
}
