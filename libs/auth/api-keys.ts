import { createHash, randomBytes } from 'node:crypto';

// Keys look like `cck_<8 visible chars>_<secret>`. Only the SHA-256 of the whole key is stored;
// the visible prefix lets an operator tell keys apart. A fast hash is enough here: the secret part
// carries 256 random bits, so there is nothing to brute-force offline.

const KEY_PATTERN = /^cck_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}$/;

export function generateApiKey(): { key: string; prefix: string; hash: string } {
  const visible = randomBytes(6).toString('base64url').replace(/[-_]/g, 'x').slice(0, 8);
  const prefix = `cck_${visible}`;
  const key = `${prefix}_${randomBytes(32).toString('base64url')}`;
  return { key, prefix, hash: hashApiKey(key) };
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function looksLikeApiKey(value: string): boolean {
  return KEY_PATTERN.test(value);
}
