import { malformed, type SimRequest } from './sim-http.js';

// The faults every provider can be steered to, each answered in the provider's own shape.

export interface NativeErrors {
  /** 503: overloaded. */
  busy(req: SimRequest): void;
  /** 429: the account's rate limit. */
  rateLimited(req: SimRequest): void;
  /** The account has no credit left at the provider. */
  noCredit(req: SimRequest): void;
  /** The provider's own failure (500). */
  failure(req: SimRequest): void;
  /** 504 from the provider's gateway. */
  gatewayTimeout(req: SimRequest): void;
}

/**
 * Answers a steered fault of a submission (or of a synchronous call) and returns true; false
 * when the request should be served normally. `hang` answers nothing at all.
 */
export function submissionFault(req: SimRequest, errors: NativeErrors, refuseCredentials: () => void): boolean {
  const s = req.steering;
  if (s.has('hang')) return true;
  if (s.has('denied')) return refuseCredentials(), true;
  if (s.has('busy')) return errors.busy(req), true;
  if (s.has('ratelimit')) return errors.rateLimited(req), true;
  if (s.has('nocredit')) return errors.noCredit(req), true;
  if (s.has('gw504')) return errors.gatewayTimeout(req), true;
  return malformed(req);
}
