import { SignJWT } from 'jose';
import type { DispatchContext, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from '../adapter.js';
import { exchange, isResult } from '../exchange.js';
import { byStatus, credentialsRefused, invalidInput, jsonOf, jsonSuccess, lostTrack, outOfCredit, policyRefusal, providerBusy, providerFailure, providerTimeout, saysPolicy, shortText, uninterpretable } from '../outcomes.js';
import { pollUntilSettled } from '../polling.js';
import { upstreamRequest, type UpstreamResponse } from '../upstream-http.js';

// Kling: every request carries a bearer JWT the router signs itself (HS256 with the secret key,
// `iss` the access key, half an hour of life). `POST /v1/videos/text2video` → `{code, message,
// data: {task_id}}`; `GET .../text2video/{task_id}` until `task_status` is succeed (the videos'
// URLs are re-hosted) or failed (`task_status_msg`; its risk control refusing the output is a
// content-policy refusal). Outcomes are `code` (0 is success), often inside an HTTP 200.

const MEDIA = { paths: [['data', 'task_result', 'videos', '*', 'url']] };
const TOKEN_LIFE_S = 1800;
// A token is signed anew this long before it would expire.
const TOKEN_MARGIN_S = 300;

interface Envelope {
  code?: unknown;
  message?: unknown;
  data?: { task_id?: unknown; task_status?: unknown; task_status_msg?: unknown } | null;
}

export class KlingAdapter implements ProviderAdapter {
  readonly kind = 'kling' as const;
  private token: { value: string; until: number } | null = null;
  private signing: Promise<string> | null = null;

  constructor(
    private readonly accessKey: string,
    private readonly secretKey: string,
  ) {}

  configured(): boolean {
    return this.accessKey !== '' && this.secretKey !== '';
  }

  secrets(): string[] {
    return [this.secretKey, ...(this.token ? [this.token.value] : [])];
  }

  /** The current token, signed again shortly before it expires (one signing at a time). */
  private async bearer(): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    if (this.token && this.token.until > now) return this.token.value;
    this.signing ??= new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(this.accessKey)
      .setExpirationTime(now + TOKEN_LIFE_S)
      .setNotBefore(now - 5)
      .sign(new TextEncoder().encode(this.secretKey))
      .then((value) => {
        this.token = { value, until: now + TOKEN_LIFE_S - TOKEN_MARGIN_S };
        return value;
      })
      .finally(() => {
        this.signing = null;
      });
    return this.signing;
  }

  async dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult> {
    const res = await exchange(model.upstreamUrl, { method: 'POST', headers: { authorization: `Bearer ${await this.bearer()}` }, body: input.raw, signal: context.signal });
    if (isResult(res)) return res;
    const doc = jsonOf(res) as Envelope | undefined;
    if (doc && typeof doc.code === 'number' && doc.code !== 0) return outcomeOfCode(doc.code, shortText(doc.message));
    if (res.status < 200 || res.status >= 300) return byStatus(res, typeof doc?.message === 'string' ? doc.message : undefined);
    const taskId = doc?.data?.task_id;
    if (typeof taskId !== 'string' || taskId === '' || taskId.length > 256) return uninterpretable('an acceptance without a task id');
    context.onHandle(taskId);
    return this.follow(model, taskId, context.signal, true);
  }

  collect(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult> {
    return this.follow(model, handle, signal, false);
  }

  private follow(model: UpstreamModel, taskId: string, signal: AbortSignal, waitFirst: boolean): Promise<GenerationResult> {
    const url = `${model.upstreamUrl.replace(/\/+$/, '')}/${encodeURIComponent(taskId)}`;
    return pollUntilSettled({
      intervalMs: model.pollIntervalMs,
      signal,
      waitFirst,
      ask: async () => upstreamRequest(url, { method: 'GET', headers: { authorization: `Bearer ${await this.bearer()}` }, signal }),
      settle: (res) => this.settle(res, model),
    });
  }

  private settle(res: UpstreamResponse, model: UpstreamModel): GenerationResult | null {
    const doc = jsonOf(res) as Envelope | undefined;
    if (doc && typeof doc.code === 'number' && doc.code !== 0) {
      return doc.code === 1203 ? lostTrack() : outcomeOfCode(doc.code, shortText(doc.message));
    }
    if (res.status < 200 || res.status >= 300) return byStatus(res);
    const message = shortText(doc?.data?.task_status_msg);
    switch (doc?.data?.task_status) {
      case 'submitted':
      case 'processing':
        return null;
      case 'succeed':
        return jsonSuccess(res, model, MEDIA);
      case 'failed':
        // Its risk control refusing what it generated: billed by a provider that bills that.
        if (saysPolicy(message)) return policyRefusal(message, 'task_failed_risk_control', true);
        return providerFailure('task failed', message);
      default:
        return uninterpretable('a task state');
    }
  }
}

/** Kling's own codes, as its documentation lists them. */
function outcomeOfCode(code: number, message: string | undefined): GenerationResult {
  if (code >= 1000 && code <= 1004) return credentialsRefused(401);
  if (code >= 1100 && code <= 1102) return outOfCredit();
  if (code === 1103 || code === 1304) return credentialsRefused(403);
  if (code >= 1200 && code <= 1202) return invalidInput([{ loc: ['body'], msg: message ?? 'The provider rejected the parameters.', type: String(code) }]);
  if (code === 1300 || code === 1301) return policyRefusal(message, String(code), false);
  if (code === 1302 || code === 1303 || code === 5001) return providerBusy();
  if (code === 5002) return providerTimeout();
  return providerFailure(`code ${code}`, message);
}
