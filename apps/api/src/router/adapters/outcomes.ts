import type { ValidationEntry } from '../errors.js';
import { isJsonContentType } from '../../http/json-body.js';
import { errorResult, successResult, validationResult, type GenerationResult, type MediaRefs, type UpstreamModel } from './adapter.js';
import { parseJson, UpstreamBroken, UpstreamTimeout, UpstreamUnreachable, type UpstreamResponse } from './upstream-http.js';

// The outcomes every provider shares, in the contract's buckets. Each adapter recognises its
// provider's own ways of saying them (error codes, states, fields) and builds them here; what it
// does not recognise falls to `byStatus`, by HTTP status alone.

const POLICY_WORDS = /polic|moderat|safety|nsfw|sensitive|inappropriate|risk control|responsible ai|content filter|flagged/i;

/** Whether a provider's own words (a code, a reason) say its content policy refused. */
export function saysPolicy(text: unknown): boolean {
  return typeof text === 'string' && POLICY_WORDS.test(text);
}

/** A provider's message made safe to show: one line, at most 300 characters. */
export function shortText(text: unknown): string | undefined {
  return typeof text === 'string' && text.trim() !== '' ? text.replace(/\s+/g, ' ').trim().slice(0, 300) : undefined;
}

/** The JSON of a response that says it is JSON (or says nothing), else undefined. */
export function jsonOf(res: UpstreamResponse): unknown {
  return isJsonContentType(res.contentType) || res.contentType === '' ? parseJson(res.body) : undefined;
}

/**
 * A content-policy refusal, as the 422 validation shape with the provider's own reason as `type`.
 * `charged`: whether the provider bills it, when that depends on where it refused.
 */
export function policyRefusal(message: string | undefined, type: string, charged?: boolean, loc: (string | number)[] = ['body']): GenerationResult {
  const result = validationResult('content_policy_violation', [{ loc, msg: message ?? 'The provider refused the request on content-policy grounds.', type }]);
  return charged === undefined ? result : { ...result, providerCharged: charged };
}

/** The provider rejected the input: the 422 validation shape, its reasons as `type`. */
export function invalidInput(entries: ValidationEntry[]): GenerationResult {
  return validationResult('invalid_input', entries);
}

/** The provider's own 422 `{detail: [...]}` reaches the caller byte for byte (unknown types included). */
export function passThroughValidation(res: UpstreamResponse, entries: ValidationEntry[]): GenerationResult {
  const bucket = entries.some((e) => saysPolicy(e.type)) ? 'content_policy_violation' : 'invalid_input';
  return { bucket, status: 422, contentType: res.contentType || 'application/json', body: res.body };
}

/** The router's own credentials at the provider: its words may name them, and only an operator can act. */
export function credentialsRefused(status: number): GenerationResult {
  return errorResult('provider_error', `The provider refused the router's credentials (HTTP ${status}).`);
}

/** The router's account at the provider has run out of credit: an operator tops it up; retry later. */
export function outOfCredit(): GenerationResult {
  return errorResult('service_unavailable', "The provider declined the call for lack of credit on the router's account; retry later.");
}

export function providerBusy(): GenerationResult {
  return errorResult('service_unavailable', 'The provider is temporarily unavailable or limiting the router; retry with backoff.');
}

export function providerTimeout(): GenerationResult {
  return errorResult('provider_timeout', 'The provider did not finish within its deadline.');
}

export function providerFailure(what: string, message?: string): GenerationResult {
  return errorResult('provider_error', `The provider reported a failure (${what})${message ? `: ${message}` : '.'}`);
}

/** A status poll that no longer knows the generation. */
export function lostTrack(): GenerationResult {
  return errorResult('provider_error', 'The provider lost track of the generation.');
}

export function uninterpretable(what = 'a result'): GenerationResult {
  return errorResult('provider_error', `The provider answered with ${what} the router cannot interpret.`);
}

/** What a status means when the provider's body says nothing the adapter recognises. */
export function byStatus(res: UpstreamResponse, message?: string): GenerationResult {
  const s = res.status;
  if (s === 401 || s === 403 || s === 407) return credentialsRefused(s);
  if (s === 402) return outOfCredit();
  if (s === 408 || s === 504) return providerTimeout();
  if (s === 429 || s === 503) return providerBusy();
  return providerFailure(`HTTP ${s}`, shortText(message));
}

/** Transport failures of a provider request. */
export function transportResult(err: unknown): GenerationResult {
  if (err instanceof UpstreamTimeout) return providerTimeout();
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

/**
 * A 2xx JSON result: it must parse, and the model's schema document must allow JSON results (a
 * gateway's HTML page sent with 200 is no result of a JSON model).
 */
export function jsonSuccess(res: UpstreamResponse, model: UpstreamModel, media?: MediaRefs): GenerationResult {
  if (res.body.length === 0) return errorResult('provider_error', 'The provider answered with an empty result.');
  if (jsonOf(res) === undefined || !declaresResultType(model.resultTypes, 'application/json')) return uninterpretable();
  return successResult(res.contentType || 'application/json', res.body, media);
}

/** A 2xx binary result (audio): passed with its own media type, which the schema document must declare. */
export function binarySuccess(res: UpstreamResponse, model: UpstreamModel): GenerationResult {
  if (res.body.length === 0) return errorResult('provider_error', 'The provider answered with an empty result.');
  if (res.contentType === '' || isJsonContentType(res.contentType) || !declaresResultType(model.resultTypes, res.contentType)) return uninterpretable();
  return successResult(res.contentType, res.body);
}

function declaresResultType(declared: readonly string[], contentType: string): boolean {
  if (declared.length === 0) return true;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return declared.some((d) => d === type || d === '*/*' || (d.endsWith('/*') && type.startsWith(d.slice(0, -1))));
}
