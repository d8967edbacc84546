import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { KeyedAdapter } from '../keyed-adapter.js';
import { exchange, isResult } from '../exchange.js';
import { byStatus, credentialsRefused, invalidInput, jsonOf, jsonSuccess, lostTrack, outOfCredit, policyRefusal, providerBusy, providerFailure, shortText, uninterpretable } from '../outcomes.js';
import { pollUntilSettled } from '../polling.js';
import { upstreamRequest, type UpstreamResponse } from '../upstream-http.js';

// MiniMax, three hops: `POST /v1/video_generation` → `{task_id}`; `GET
// /v1/query/video_generation?task_id=` until `status` is Success (with a `file_id`) or Fail; then
// `GET /v1/files/retrieve?file_id=`, whose body (the file, its `download_url` re-hosted) is the
// caller's answer. Outcomes are `base_resp.status_code`, usually inside an HTTP 200.

const MEDIA = { paths: [['file', 'download_url']] };
const PENDING = new Set(['Queueing', 'Preparing', 'Processing']);

interface BaseResp {
  base_resp?: { status_code?: unknown; status_msg?: unknown };
}

export class MinimaxAdapter extends KeyedAdapter implements ProviderAdapter {
  readonly kind = 'minimax' as const;

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.key}` };
  }

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: this.headers(), body: input.raw, signal: context.signal });
    if (isResult(res)) return res;
    const doc = jsonOf(res) as (BaseResp & { task_id?: unknown }) | undefined;
    const refused = baseRespOutcome(doc);
    if (refused) return refused;
    if (res.status < 200 || res.status >= 300) return byStatus(res);
    if (typeof doc?.task_id !== 'string' || doc.task_id === '' || doc.task_id.length > 256) return uninterpretable('an acceptance without a task id');
    context.onHandle(doc.task_id);
    return this.follow(model, doc.task_id, context.signal, true);
  }

  collect(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult> {
    return this.follow(model, handle, signal, false);
  }

  private follow(model: UpstreamModel, taskId: string, signal: AbortSignal, waitFirst: boolean): Promise<GenerationResult> {
    const url = new URL(`query/video_generation?task_id=${encodeURIComponent(taskId)}`, model.upstreamUrl).toString();
    return pollUntilSettled({
      intervalMs: model.pollIntervalMs,
      signal,
      waitFirst,
      ask: () => upstreamRequest(url, { method: 'GET', headers: this.headers(), signal }),
      settle: (res) => this.settle(res, model, signal),
    });
  }

  private async settle(res: UpstreamResponse, model: UpstreamModel, signal: AbortSignal): Promise<GenerationResult | null> {
    const doc = jsonOf(res) as (BaseResp & { status?: unknown; file_id?: unknown }) | undefined;
    const code = doc?.base_resp?.status_code;
    const message = shortText(doc?.base_resp?.status_msg);
    if (doc?.status === 'Fail') {
      if (code === 1026 || code === 1027) return policyRefusal(message, String(code), code === 1027);
      return providerFailure(`task failed${typeof code === 'number' ? ` (code ${code})` : ''}`, message);
    }
    if (code === 2013) return lostTrack();
    const refused = baseRespOutcome(doc);
    if (refused) return refused;
    if (res.status < 200 || res.status >= 300) return byStatus(res);
    if (typeof doc?.status === 'string' && PENDING.has(doc.status)) return null;
    if (doc?.status !== 'Success') return uninterpretable('a task state');
    if ((typeof doc.file_id !== 'string' && typeof doc.file_id !== 'number') || String(doc.file_id) === '') return uninterpretable('a finished task without a file');
    return this.retrieve(model, String(doc.file_id), signal);
  }

  /** The third hop: the file record, with its download URL. */
  private async retrieve(model: UpstreamModel, fileId: string, signal: AbortSignal): Promise<GenerationResult> {
    const url = new URL(`files/retrieve?file_id=${encodeURIComponent(fileId)}`, model.upstreamUrl).toString();
    const res = await exchange(url, { method: 'GET', headers: this.headers(), signal });
    if (isResult(res)) return res;
    const doc = jsonOf(res) as (BaseResp & { file?: { download_url?: unknown } }) | undefined;
    const refused = baseRespOutcome(doc);
    if (refused) return refused;
    if (res.status < 200 || res.status >= 300) return byStatus(res);
    if (typeof doc?.file?.download_url !== 'string') return uninterpretable('a file without a download URL');
    return jsonSuccess(res, model, MEDIA);
  }
}

/** MiniMax's `base_resp` codes, as its documentation lists them; null for 0 (success) or none. */
function baseRespOutcome(doc: BaseResp | undefined): GenerationResult | null {
  const code = doc?.base_resp?.status_code;
  if (typeof code !== 'number' || code === 0) return null;
  const message = shortText(doc?.base_resp?.status_msg);
  switch (code) {
    case 1002:
    case 1039:
      return providerBusy();
    case 1004:
      return credentialsRefused(401);
    case 1008:
      return outOfCredit();
    case 1026:
    case 1027:
      return policyRefusal(message, String(code), code === 1027);
    case 2013:
      return invalidInput([{ loc: ['body'], msg: message ?? 'The provider rejected the parameters.', type: String(code) }]);
    default:
      return providerFailure(`code ${code}`, message);
  }
}
