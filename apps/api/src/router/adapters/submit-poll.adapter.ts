import { setTimeout as sleep } from 'node:timers/promises';
import { errorResult, policyRefusal, successResult, type DispatchContext, type GenerationResult, type ProviderAdapter, type UpstreamModel } from './adapter.js';
import { failureResult, isPolicyCode, transportResult } from './responses.js';
import { parseJson, UpstreamTimeout, upstreamRequest, type UpstreamResponse } from './upstream-http.js';
import { isJsonContentType } from '../../http/json-body.js';

// Partners that accept a generation (`POST {upstream}` → `{id, status}`) and are then asked about
// it (`GET {upstream}/{id}` → `{id, status, output?, error?}`) until it ends. The router holds the
// caller's connection meanwhile. The id is the handle an idempotent retry collects by.

const PENDING = new Set(['queued', 'pending', 'starting', 'running', 'processing', 'in_progress']);
// A poll that fails this way is worth asking again; anything else ends the generation.
const TRANSIENT_POLL_STATUS = new Set([429, 500, 502, 503, 504]);

interface GenerationDoc {
  id?: unknown;
  status?: unknown;
  error?: { code?: unknown; message?: unknown } | null;
}

export class SubmitPollAdapter implements ProviderAdapter {
  readonly kind = 'submit-poll' as const;

  async dispatch(model: UpstreamModel, body: Buffer, context: DispatchContext): Promise<GenerationResult> {
    let res: UpstreamResponse;
    try {
      res = await upstreamRequest(model.upstreamUrl, { method: 'POST', body, signal: context.signal });
    } catch (err) {
      return transportResult(err);
    }
    if (res.status < 200 || res.status >= 300) return failureResult(res);
    const doc = isJsonContentType(res.contentType) ? (parseJson(res.body) as GenerationDoc | undefined) : undefined;
    if (!doc || typeof doc.id !== 'string' || doc.id === '' || doc.id.length > 512) {
      return errorResult('provider_error', 'The provider accepted the call but returned no generation id the router can follow.');
    }
    context.onHandle(doc.id);
    const settled = this.interpret(doc, res);
    return settled ?? this.follow(model, doc.id, context.signal, true);
  }

  /** Asks at once: a retry comes after the generation has had time to run, maybe to its end. */
  collect(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult> {
    return this.follow(model, handle, signal, false);
  }

  private async follow(model: UpstreamModel, handle: string, signal: AbortSignal, waitFirst: boolean): Promise<GenerationResult> {
    const url = `${model.upstreamUrl.replace(/\/+$/, '')}/${encodeURIComponent(handle)}`;
    for (let wait = waitFirst; ; wait = true) {
      try {
        if (wait) await sleep(model.pollIntervalMs, undefined, { signal });
      } catch {
        return transportResult(new UpstreamTimeout('deadline'));
      }
      let res: UpstreamResponse;
      try {
        res = await upstreamRequest(url, { method: 'GET', signal });
      } catch (err) {
        if (signal.aborted) return transportResult(err);
        continue; // one lost poll does not lose the generation
      }
      if (TRANSIENT_POLL_STATUS.has(res.status)) continue;
      if (res.status < 200 || res.status >= 300) return errorResult('provider_error', `The provider lost track of the generation (HTTP ${res.status}).`);
      const doc = isJsonContentType(res.contentType) ? (parseJson(res.body) as GenerationDoc | undefined) : undefined;
      if (!doc || typeof doc !== 'object') return errorResult('provider_error', 'The provider answered a status poll with something the router cannot interpret.');
      const settled = this.interpret(doc, res);
      if (settled) return settled;
    }
  }

  /** The end of a generation, or null while it is still pending. */
  private interpret(doc: GenerationDoc, res: UpstreamResponse): GenerationResult | null {
    const status = typeof doc.status === 'string' ? doc.status.toLowerCase() : '';
    if (PENDING.has(status)) return null;
    const message = typeof doc.error?.message === 'string' ? doc.error.message.slice(0, 300) : undefined;
    switch (status) {
      case 'succeeded':
      case 'completed':
        return successResult(res.contentType, res.body);
      case 'rejected':
      case 'moderated':
        return policyRefusal(message ?? 'The provider refused the input on content-policy grounds.', typeof doc.error?.code === 'string' ? doc.error.code : 'content_policy_violation');
      case 'failed':
      case 'canceled':
      case 'cancelled':
        if (isPolicyCode(doc.error?.code)) return policyRefusal(message ?? 'The provider refused the input on content-policy grounds.', String(doc.error?.code));
        return errorResult('provider_error', `The provider reported the generation ${status}${message ? `: ${message}` : '.'}`);
      default:
        return errorResult('provider_error', 'The provider reported a generation state the router cannot interpret.');
    }
  }
}
