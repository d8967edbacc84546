import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { JobKeys } from './keys.js';

// `extra_data` carries partner credentials. It must reach the engine but never rest anywhere in
// clear: not in PostgreSQL, not in the queue payload. It travels from API to worker in its own
// Redis key, encrypted with a key derived from SIGNING_SECRET, and is deleted when the job ends.

function keyOf(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'comfy-cloud', 'extra-data', 32));
}

export function sealExtraData(secret: string, value: Record<string, unknown>): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyOf(secret), iv);
  const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

export function openExtraData(secret: string, sealed: string): Record<string, unknown> {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', keyOf(secret), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  const text = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  return JSON.parse(text) as Record<string, unknown>;
}

export class ExtraDataVault {
  constructor(
    private readonly redis: Redis,
    private readonly keys: JobKeys,
    private readonly secret: string,
  ) {}

  async put(jobId: string, value: Record<string, unknown>, ttlSeconds: number): Promise<void> {
    await this.redis.set(this.keys.extraData(jobId), sealExtraData(this.secret, value), 'EX', ttlSeconds);
  }

  async get(jobId: string): Promise<Record<string, unknown> | null> {
    const sealed = await this.redis.get(this.keys.extraData(jobId));
    return sealed ? openExtraData(this.secret, sealed) : null;
  }

  async delete(jobId: string): Promise<void> {
    await this.redis.del(this.keys.extraData(jobId));
  }
}
