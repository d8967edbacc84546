import type { DispatchContext, GenerationResult, ProviderAdapter, UpstreamModel } from './adapter.js';
import { failureResult, successOrGarbage, transportResult } from './responses.js';
import { upstreamRequest } from './upstream-http.js';

/** Partners that answer the POST itself with the finished result. */
export class SyncJsonAdapter implements ProviderAdapter {
  readonly kind = 'sync-json' as const;

  async dispatch(model: UpstreamModel, body: Buffer, context: DispatchContext): Promise<GenerationResult> {
    try {
      const res = await upstreamRequest(model.upstreamUrl, { method: 'POST', body, signal: context.signal });
      return res.status >= 200 && res.status < 300 ? successOrGarbage(res, model) : failureResult(res);
    } catch (err) {
      return transportResult(err);
    }
  }
}
