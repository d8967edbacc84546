import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { openText, sealText } from '#libs/auth';

// An endpoint's signing secret in the Standard Webhooks format (`whsec_` and base64 of 32 random
// bytes). It must be readable to sign, so it is sealed at rest, never stored in clear.

const PURPOSE = 'webhook-secret';

export function newEndpointSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export function sealEndpointSecret(signingSecret: string, secret: string): string {
  return sealText(signingSecret, PURPOSE, secret);
}

export function openEndpointSecret(signingSecret: string, sealed: string): string {
  return openText(signingSecret, PURPOSE, sealed);
}

/** How long a rotated-out secret keeps signing beside its successor. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

/**
 * The three Standard Webhooks headers of one attempt. Each secret signs (`v1,<base64>`); several
 * signatures are separated by spaces, and a receiver accepts the message if any one verifies, so
 * receivers holding the old or the new secret both accept it during a rotation.
 */
export function signedHeaders(secrets: string[], messageId: string, at: Date, body: string): Record<string, string> {
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(messageId, at, body)).join(' '),
  };
}
