import type { Redis } from 'ioredis';
import { openText, sealText } from '#libs/auth';
import type { JobKeys } from './keys.js';

// `extra_data` carries partner credentials. It must reach the engine but never rest anywhere in
// clear: not in PostgreSQL, not in the queue payload. It travels from API to worker in its own
// Redis key, encrypted with a key derived from SIGNING_SECRET, and is deleted when the job ends.

export function sealExtraData(secret: string, value: Record<string, unknown>): string {
  return sealText(secret, 'extra-data', JSON.stringify(value));
}

export function openExtraData(secret: string, sealed: string): Record<string, unknown> {
  return JSON.parse(openText(secret, 'extra-data', sealed)) as Record<string, unknown>;
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
