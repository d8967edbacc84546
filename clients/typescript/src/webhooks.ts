import { Webhook } from 'standardwebhooks';

/** Headers as Node's `req.headers`, a Fetch `Headers`, or a plain record (any letter case). */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * Verifies a webhook the service sent (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature` with `v1,` HMAC-SHA256 under the endpoint's `whsec_…` secret; during a
 * rotation either secret's signature is accepted) and returns its parsed event `{type, timestamp,
 * data}`. Throws unless a signature matches and the timestamp is within five minutes. `body` must
 * be the raw body as received: re-serialized JSON does not verify. Dedupe on `webhook-id`: a
 * retry carries the same one.
 */
export function verifyWebhook<T = { type: string; timestamp: string; data: Record<string, unknown> }>(headers: WebhookHeaders, body: string | Uint8Array, secret: string): T {
  const flat: Record<string, string> = {};
  const entries = headers instanceof Headers ? headers.entries() : Object.entries(headers);
  for (const [name, value] of entries) {
    if (value !== undefined) flat[name.toLowerCase()] = Array.isArray(value) ? value.join(' ') : value;
  }
  const payload = typeof body === 'string' ? body : new TextDecoder().decode(body);
  return new Webhook(secret).verify(payload, flat) as T;
}
