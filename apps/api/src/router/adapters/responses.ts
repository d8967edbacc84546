import type { ValidationEntry } from '../errors.js';
import { errorResult, policyRefusal, successResult, type GenerationResult, type UpstreamModel } from './adapter.js';
import { parseJson, UpstreamBroken, UpstreamTimeout, UpstreamUnreachable, type UpstreamResponse } from './upstream-http.js';
import { isJsonContentType } from '../../http/json-body.js';

// Reading partner answers: what every partner style shares.

const POLICY_WORDS = /polic|moderat|safety|nsfw|content_filter|flagged/i;

export function isPolicyCode(code: unknown): boolean {
  return typeof code === 'string' && POLICY_WORDS.test(code);
}

function providerMessage(parsed: unknown): string | undefined {
  if (!parsed || typeof parsed !== 'object') return undefined;
  const p = parsed as { error?: unknown; message?: unknown; detail?: unknown };
  const error = p.error as { message?: unknown } | string | undefined;
  const text = typeof error === 'string' ? error : typeof error?.message === 'string' ? error.message : typeof p.message === 'string' ? p.message : typeof p.detail === 'string' ? p.detail : undefined;
  return text?.replace(/\s+/g, ' ').slice(0, 300);
}

function errorCode(parsed: unknown): unknown {
  if (!parsed || typeof parsed !== 'object') return undefined;
  const p = parsed as { error?: { code?: unknown; type?: unknown } | string; code?: unknown; type?: unknown };
  if (typeof p.error === 'object' && p.error) return p.error.code ?? p.error.type;
  return p.code ?? p.type;
}

/**
 * A 2xx body: JSON must parse; another media type (audio, images) passes as it is. Either fails
 * when the model's schema document declares result types without it: a gateway's HTML error page
 * sent with 200 is no result of a JSON model, nor a JSON document one of an audio model.
 */
export function successOrGarbage(res: UpstreamResponse, model: UpstreamModel): GenerationResult {
  if (res.body.length === 0) return errorResult('provider_error', 'The provider answered with an empty result.');
  if (isJsonContentType(res.contentType) || res.contentType === '') {
    if (parseJson(res.body) === undefined || !declaresResultType(model.resultTypes, 'application/json')) return uninterpretable();
    return successResult(res.contentType || 'application/json', res.body);
  }
  if (!declaresResultType(model.resultTypes, res.contentType)) return uninterpretable();
  return successResult(res.contentType, res.body);
}

function uninterpretable(): GenerationResult {
  return errorResult('provider_error', 'The provider answered with a result the router cannot interpret.');
}

function declaresResultType(declared: readonly string[], contentType: string): boolean {
  if (declared.length === 0) return true;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return declared.some((d) => d === type || d === '*/*' || (d.endsWith('/*') && type.startsWith(d.slice(0, -1))));
}

/** The statuses every partner uses the same way; refusals on policy grounds by error code. */
export function failureResult(res: UpstreamResponse): GenerationResult {
  const parsed = isJsonContentType(res.contentType) ? parseJson(res.body) : undefined;
  const message = providerMessage(parsed);
  const code = errorCode(parsed);
  if ((res.status === 400 || res.status === 403 || res.status === 422 || res.status === 451) && isPolicyCode(code)) {
    return policyRefusal(message ?? 'The provider refused the input on content-policy grounds.', String(code));
  }
  if (res.status === 408 || res.status === 504) return errorResult('provider_timeout', 'The provider did not finish within its deadline.');
  // The router's own credentials at the provider: its words may name them, and the caller can do
  // nothing about them (an operator can).
  if (res.status === 401 || res.status === 407) return errorResult('provider_error', `The provider refused the router's credentials (HTTP ${res.status}).`);
  if (res.status === 429 || res.status === 503) return errorResult('service_unavailable', 'The provider is temporarily unavailable; retry with backoff.');
  const suffix = message ? `: ${message}` : '.';
  return errorResult('provider_error', `The provider reported a failure (HTTP ${res.status})${suffix}`);
}

/** Transport failures of a provider request. */
export function transportResult(err: unknown): GenerationResult {
  if (err instanceof UpstreamTimeout) return errorResult('provider_timeout', 'The provider did not answer within its deadline.');
  if (err instanceof UpstreamUnreachable) return errorResult('service_unavailable', 'The provider cannot be reached right now; retry with backoff.');
  if (err instanceof UpstreamBroken) return errorResult('provider_error', `The provider's response could not be read (${err.message}).`);
  throw err;
}

/** A body in RouterValidationErrorResponse shape: `{detail: [{loc, msg, type, ...}]}`. */
export function validationEntries(parsed: unknown): ValidationEntry[] | null {
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
  const detail = (parsed as { detail?: unknown }).detail;
  if (!Array.isArray(detail) || detail.length === 0) return null;
  for (const entry of detail) {
    if (!entry || typeof entry !== 'object') return null;
    const e = entry as Partial<ValidationEntry>;
    if (!Array.isArray(e.loc) || typeof e.msg !== 'string' || typeof e.type !== 'string') return null;
  }
  return detail as ValidationEntry[];
}
