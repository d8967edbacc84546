import { BUCKET_STATUS, type RouterBucket, type ValidationEntry } from '../errors.js';

// What every provider adapter is: it speaks one provider's native API (paths, credentials, poll
// states, error bodies) and turns each of the provider's outcomes into a result in the router's
// terms. See docs/router.md for each provider's mapping.

export const ADAPTER_KINDS = ['bfl', 'openai-images', 'stability', 'recraft', 'ideogram', 'kling', 'luma', 'runway', 'minimax', 'google-veo', 'elevenlabs'] as const;
export type AdapterKind = (typeof ADAPTER_KINDS)[number];

/** What a model call needs to know about its model. */
export interface UpstreamModel {
  id: string;
  provider: string;
  adapterKind: string;
  /** The provider's endpoint for this model (its origin may be replaced by ROUTER_UPSTREAM_BASE_URLS). */
  upstreamUrl: string;
  timeoutMs: number;
  pollIntervalMs: number;
  /** The media types of its results, as its schema document declares them; empty: not declared. */
  resultTypes: readonly string[];
}

/** Result media the provider handed out by URL: the router re-hosts them (see media/). */
export interface MediaRefs {
  /** Where the URLs are in the JSON body: keys from the root, `*` for every element or member. */
  paths: readonly (readonly string[])[];
  /** Headers a download needs (the provider's credentials); sent only to the provider's own origin. */
  headers?: Record<string, string>;
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
  /** Media URLs in a successful JSON body, to re-host before anyone sees it. */
  media?: MediaRefs;
}

/** What a call hands its provider: the body as the caller sent it, and as parsed. */
export interface ProviderInput {
  raw: Buffer;
  parsed: unknown;
}

export interface DispatchContext {
  /** Aborts at the provider's deadline. */
  signal: AbortSignal;
  /** Called as soon as the provider accepted a generation it can be asked about later. */
  onHandle(handle: string): void;
}

export interface ProviderAdapter {
  readonly kind: AdapterKind;
  dispatch(model: UpstreamModel, input: ProviderInput, context: DispatchContext): Promise<GenerationResult>;
  /** Collects an accepted generation by its handle without dispatching another (submit-then-poll). */
  collect?(model: UpstreamModel, handle: string, signal: AbortSignal): Promise<GenerationResult>;
  /** Whether the router has the credentials this provider needs. */
  configured(): boolean;
  /** Every credential value this adapter sends (tokens it derived included): never shown to anyone. */
  secrets(): string[];
}

const JSON_TYPE = 'application/json; charset=utf-8';

export function errorResult(bucket: RouterBucket, detail: string): GenerationResult {
  return { bucket, status: BUCKET_STATUS[bucket], contentType: JSON_TYPE, body: Buffer.from(JSON.stringify({ detail, error_type: bucket })) };
}

/** A 422 RouterValidationErrorResponse built by the router (the provider's own bodies pass as they are). */
export function validationResult(bucket: 'invalid_input' | 'content_policy_violation', entries: ValidationEntry[]): GenerationResult {
  return { bucket, status: 422, contentType: JSON_TYPE, body: Buffer.from(JSON.stringify({ detail: entries })) };
}

export function successResult(contentType: string, body: Buffer, media?: MediaRefs): GenerationResult {
  return { bucket: 'success', status: 200, contentType, body, ...(media ? { media } : {}) };
}
