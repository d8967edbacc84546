// The router's closed set of 15 error buckets (model-router.md, Errors) and the status each
// answers with. Shared by the router itself and the API documentation.

export const ROUTER_BUCKETS = [
  'invalid_input',
  'content_policy_violation',
  'provider_error',
  'provider_timeout',
  'insufficient_credits',
  'model_not_found',
  'unauthorized',
  'forbidden',
  'concurrency_limit_exceeded',
  'client_disconnected',
  'internal_error',
  'deadline_exceeded',
  'not_enabled',
  'service_unavailable',
  'rate_limited',
] as const;

export type RouterBucket = (typeof ROUTER_BUCKETS)[number];

export const ROUTER_BUCKET_STATUS: Record<RouterBucket, number> = {
  invalid_input: 400,
  content_policy_violation: 422,
  provider_error: 502,
  provider_timeout: 504,
  insufficient_credits: 402,
  model_not_found: 404,
  unauthorized: 401,
  forbidden: 403,
  concurrency_limit_exceeded: 429,
  // Never delivered (the caller is gone); 499 is what the usage record stores.
  client_disconnected: 499,
  internal_error: 500,
  deadline_exceeded: 504,
  not_enabled: 403,
  service_unavailable: 503,
  rate_limited: 429,
};
