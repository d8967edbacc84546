import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { JobKeys } from './keys.js';

/**
 * Engines' node definitions (`/object_info`) travel through Redis: each worker publishes what its
 * engine reports when it starts and whenever it changes; API replicas validate workflows against
 * the latest copy without knowing where the engines are.
 */
export async function publishNodeDefinitions(redis: Redis, keys: JobKeys, definitions: unknown): Promise<boolean> {
  const text = JSON.stringify(definitions);
  const version = createHash('sha256').update(text).digest('hex').slice(0, 16);
  if ((await redis.get(keys.nodeDefinitionsVersion)) === version) return false;
  await redis.multi().set(keys.nodeDefinitions, text).set(keys.nodeDefinitionsVersion, version).exec();
  return true;
}

export class NodeDefinitionsCache<T> {
  private version: string | null = null;
  private value: T | null = null;
  private checkedAt = 0;

  constructor(
    private readonly redis: Redis,
    private readonly keys: JobKeys,
    private readonly recheckMs = 2_000,
  ) {}

  /** The latest definitions, or null when no engine has reported yet. */
  async get(): Promise<T | null> {
    const now = Date.now();
    if (this.value && now - this.checkedAt < this.recheckMs) return this.value;
    const version = await this.redis.get(this.keys.nodeDefinitionsVersion);
    this.checkedAt = now;
    if (version && version === this.version && this.value) return this.value;
    const text = await this.redis.get(this.keys.nodeDefinitions);
    if (!text) return this.value;
    this.value = JSON.parse(text) as T;
    this.version = version;
    return this.value;
  }
}
