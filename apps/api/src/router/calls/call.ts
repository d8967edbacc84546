import type { Account } from '#libs/db';
import type { Draining } from '../../core/draining.js';
import type { GenerationResult } from '../adapters/index.js';
import { RouterError } from '../errors.js';

// What one router call is made of, shared by dispatch, keyed retries and settlement.

/** What the controller knows about the caller's connection. */
export interface CallerFate {
  /** Resolves once the response left (true) or the caller went away first (false). */
  settled: Promise<boolean>;
  /** Whether the caller has gone already: nothing can reach it any more. */
  gone(): boolean;
}

export interface CallInput {
  callId: string;
  account: Account;
  provider: string;
  model: string;
  rawBody: Buffer | undefined;
  body: unknown;
  /** Why the body could not be read as JSON, when it could not. */
  bodyError: string | undefined;
  /** The Idempotency-Key header as sent: RouterIdempotencyKeySchema parses it once the model and body are judged, as the router orders its refusals. */
  idempotencyKeyHeader: string | string[] | undefined;
  fate: CallerFate;
  /** Epoch ms the request arrived. */
  startedAt: number;
  /** Scheme and authority the caller used: where the signed URLs of re-hosted media point (local store); asked only then. */
  origin(): string;
}

export interface CallReply {
  result: GenerationResult;
  headers: Record<string, string>;
}

/** A generation this process is running or collecting: joiners wait on the same promise. */
export interface Generation {
  promise: Promise<GenerationResult>;
  handle: string | null;
}

/** A keyed call's key and the hash of what it asked (model and body). */
export interface KeyClaim {
  key: string;
  requestHash: string;
}

export const DEADLINE = Symbol('deadline');

/**
 * Nothing is dispatched for a caller that has gone: no one would receive the result, yet it would
 * be billed. The call is recorded as client_disconnected, on the way every refused call is.
 */
export function callerGone(): RouterError {
  return new RouterError('client_disconnected', 'The caller closed the connection before the call was dispatched.');
}

/** The promise's value, or DEADLINE once `at` (epoch ms) passes or the stop's grace is over, whichever is first. */
export function raceDeadline<T>(promise: Promise<T>, at: number, stopping: Draining): Promise<T | typeof DEADLINE> {
  const ms = at - Date.now();
  if (ms <= 0 || stopping.graceOver) return Promise.resolve(DEADLINE);
  let timer: NodeJS.Timeout | undefined;
  let cancel: () => void = () => undefined;
  const deadline = new Promise<typeof DEADLINE>((resolve) => {
    timer = setTimeout(() => resolve(DEADLINE), ms);
    cancel = stopping.onGraceOver(() => resolve(DEADLINE));
  });
  return Promise.race([promise, deadline]).finally(() => {
    clearTimeout(timer);
    cancel();
  });
}

/** Aborts a provider exchange at its timeout, or when the stop's grace is over; release it once done. */
export function providerBound(ms: number, stopping: Draining): { signal: AbortSignal; release(): void } {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms).unref();
  const cancel = stopping.onGraceOver(() => controller.abort());
  return {
    signal: controller.signal,
    release: () => {
      clearTimeout(timer);
      cancel();
    },
  };
}
