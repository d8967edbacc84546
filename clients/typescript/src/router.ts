import { type Transport } from './client.js';
import { ComfyCloudError, errorOf } from './errors.js';
import { backoffMs, sleep } from './retry.js';

export interface ModelCallOptions {
  /** Keys the call, so a retry collects the same generation; a fresh UUID when omitted. */
  idempotencyKey?: string;
  /** Calls in all after `504 deadline_exceeded` (default 3). */
  attempts?: number;
  signal?: AbortSignal;
}

export interface ModelCallResult<T = unknown> {
  /** The provider's native answer, as the router passed it on. */
  body: T;
  headers: Headers;
  /** `X-Service-Request-Id` of the call that answered. */
  requestId: string | null;
  /** `X-Service-Credits-Used`, on a call that was charged (not on a replay). */
  creditsUsed: number | null;
  /** True when the answer is a recorded one (`Idempotent-Replayed: true`). */
  replayed: boolean;
}

/**
 * Calls a router model (`POST /v1/models/{provider}/{model}`) with its native JSON input. The
 * router holds the connection up to its deadline; when that passes first (`504
 * deadline_exceeded`) the generation goes on at the provider, and a retry with the same
 * `Idempotency-Key` collects it instead of starting another (docs/router.md, Keyed retries).
 * Other refusals are thrown as ComfyCloudError with the router's `error_type` as `code`.
 */
export async function callModel<T = unknown>(t: Transport, model: string, input: unknown, options: ModelCallOptions = {}): Promise<ModelCallResult<T>> {
  const [provider, name] = model.split('/');
  if (!provider || !name) throw new TypeError(`A router model is "<provider>/<model>", not "${model}"`);
  const headers = { 'idempotency-key': options.idempotencyKey ?? crypto.randomUUID() };
  const attempts = options.attempts ?? 3;
  for (let attempt = 1; ; attempt++) {
    const { data, error, response } = await t.api.POST('/v1/models/{provider}/{model}', {
      params: { path: { provider, model: name } },
      body: input as never,
      headers,
      signal: options.signal,
    });
    if (response.ok) {
      const credits = response.headers.get('x-service-credits-used');
      return {
        body: data as T,
        headers: response.headers,
        requestId: response.headers.get('x-service-request-id'),
        creditsUsed: credits === null ? null : Number(credits),
        replayed: response.headers.get('idempotent-replayed') === 'true',
      };
    }
    const failure = error === undefined ? await errorOf(response) : ComfyCloudError.from(response, error);
    if (failure.code !== 'deadline_exceeded' || attempt >= attempts) throw failure;
    await sleep(failure.retryAfterSeconds !== null ? failure.retryAfterSeconds * 1000 : backoffMs(attempt), options.signal);
  }
}
