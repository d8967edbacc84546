import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

// Secrets the service must read again but never keep in clear (a job's partner credentials, a
// webhook endpoint's signing secret): AES-256-GCM under a key derived from SIGNING_SECRET, one
// key per purpose, so a value sealed for one use never opens as another's.

function keyOf(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'comfy-cloud', purpose, 32));
}

/** `text` sealed for `purpose`: base64 of IV, tag and ciphertext. */
export function sealText(secret: string, purpose: string, text: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyOf(secret, purpose), iv);
  const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

/** What `sealText` sealed for the same purpose; throws when it was altered or sealed otherwise. */
export function openText(secret: string, purpose: string, sealed: string): string {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', keyOf(secret, purpose), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}
