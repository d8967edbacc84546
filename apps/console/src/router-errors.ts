// What each of the router's 15 error buckets means for the caller, in words a person can act on.

const EXPLAINED: Record<string, { meaning: string; retry: string }> = {
  invalid_input: { meaning: 'The input was refused before it reached the model: a malformed body, or values the model\'s schema does not accept.', retry: 'Fix the input and call again.' },
  content_policy_violation: { meaning: 'The provider refused the input on content-policy grounds.', retry: 'The same input is refused again; change it. This model says whether such a refusal is charged.' },
  provider_error: { meaning: 'The provider reported a failure of its own, or answered with something that is not a result.', retry: 'Retrying may work; if it keeps failing, the provider has a problem.' },
  provider_timeout: { meaning: 'The provider did not answer within its deadline.', retry: 'Retry later.' },
  insufficient_credits: { meaning: 'Your account has too few credits for this model.', retry: 'Ask an operator for credits.' },
  model_not_found: { meaning: 'No runnable model has this id.', retry: 'Pick a model from the catalog.' },
  unauthorized: { meaning: 'The service did not accept your credential.', retry: 'Sign in again.' },
  forbidden: { meaning: 'Your account may not use this model or operation, or it is inactive.', retry: 'Ask an operator for access.' },
  concurrency_limit_exceeded: { meaning: 'Your account has as many calls in flight (or as much spend committed) as it may.', retry: 'Retry when one of your calls has finished.' },
  client_disconnected: { meaning: 'The connection closed before the result arrived.', retry: 'Call again with the same idempotency key to collect it.' },
  internal_error: { meaning: 'The router failed.', retry: 'Retry later.' },
  deadline_exceeded: { meaning: 'The router stopped waiting at its own time limit; nothing was refused.', retry: 'Retrying with the same idempotency key collects a generation the provider already accepted.' },
  not_enabled: { meaning: 'The model router is not switched on for your account.', retry: 'Not retryable: an operator has to enable it.' },
  service_unavailable: { meaning: 'A dependency of the service is briefly unavailable.', retry: 'Retry in a few seconds.' },
  rate_limited: { meaning: 'Your account used up its allowance of calls for the current window.', retry: 'Wait for the window to roll over.' },
};

/** The explanation of a bucket; an unknown one is treated as `internal_error`, as the contract says. */
export function explainBucket(bucket: string | null): { bucket: string; meaning: string; retry: string } {
  const known = bucket && Object.hasOwn(EXPLAINED, bucket) ? bucket : 'internal_error';
  return { bucket: bucket ?? 'internal_error', ...EXPLAINED[known]! };
}
