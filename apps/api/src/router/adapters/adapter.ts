import { BUCKET_STATUS, type RouterBucket, type ValidationEntry } from '../errors.js';

export const ADAPTER_KINDS = ['sync-json', 'submit-poll', 'validating-json'] as const;
export type AdapterKind = (typeof ADAPTER_KINDS)[number];

/** What a model call needs to know about its model. */
export interface UpstreamModel {
  id: string;
  upstreamUrl: string;
  timeoutMs: number;
  pollIntervalMs: number;
  /** The media types of its results, as its schema document declares them; empty: not declared. */
  resultTypes: readonly string[];
}

/**
 * The end of one provider generation, already in the shape the caller receives: status, media
 * type and bytes, plus the bucket (`success` or an error bucket). A replay sends exactly this.
 */
export interface GenerationResult {
  bucket: RouterBucket | 'success';
  status: number;
  contentType: string;
  body: Buffer;
  /**
   * For a content-policy refusal, whether the provider charges for it, when its adapter knows
   * (a refusal of the output usually is charged, one of the input is not).
   */
  providerCharged?: boolean;
}

export interface DispatchContext {
  /** Aborts at the provider's deadline. */
  signal: AbortSignal;
  /** Called as soon as the provider accepted a generation it can be asked about later. */
  onHandle(handle: string): void;
}

export interface ProviderAdapter {
  readonly kind: AdapterKind;
  dispatch(model: UpstreamModel, body: Buffer, context: DispatchContext): Promise<GenerationResult>;
  /** Collects an accepted generation by its handle without dispatching another (submit-then-poll). */
  collect?(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult>;
}

const JSON_TYPE = 'application/json; charset=utf-8';

export function errorResult(bucket: RouterBucket, detail: string): GenerationResult {
  return { bucket, status: BUCKET_STATUS[bucket], contentType: JSON_TYPE, body: Buffer.from(JSON.stringify({ detail, error_type: bucket })) };
}

/** A 422 RouterValidationErrorResponse built by the router (the provider's own bodies pass as they are). */
export function validationResult(bucket: 'invalid_input' | 'content_policy_violation', entries: ValidationEntry[]): GenerationResult {
  return { bucket, status: 422, contentType: JSON_TYPE, body: Buffer.from(JSON.stringify({ detail: entries })) };
}

export function policyRefusal(message: string, type = 'content_policy_violation'): GenerationResult {
  return validationResult('content_policy_violation', [{ loc: ['body'], msg: message, type }]);
}

export function successResult(contentType: string, body: Buffer): GenerationResult {
  return { bucket: 'success', status: 200, contentType, body };
}
