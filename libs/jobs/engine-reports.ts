import { parseLosslessJson } from '#libs/contracts';
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * What engines report about themselves (node definitions from `/object_info`, model and embedding
 * names) travels through Redis: each worker publishes what its engine reports when it starts and
 * whenever it changes; API replicas read the latest copy without knowing where the engines are.
 * Each report is a JSON document at `key` with a content hash at `key:version`, so readers
 * re-parse it only when it changed.
 */
export async function publishEngineReport(redis: Redis, key: string, report: unknown): Promise<boolean> {
  const text = JSON.stringify(report);
  const version = createHash('sha256').update(text).digest('hex').slice(0, 16);
  if ((await redis.get(`${key}:version`)) === version) return false;
  await redis.multi().set(key, text).set(`${key}:version`, version).exec();
  return true;
}

export class EngineReportCache<T> {
  private version: string | null = null;
  private value: T | null = null;
  private checkedAt = 0;

  constructor(
    private readonly redis: Redis,
    private readonly key: string,
    private readonly recheckMs = 2_000,
  ) {}

  /** The latest report, or null when no engine has made one yet. */
  async get(): Promise<T | null> {
    const now = Date.now();
    if (this.value && now - this.checkedAt < this.recheckMs) return this.value;
    const version = await this.redis.get(`${this.key}:version`);
    this.checkedAt = now;
    if (version && version === this.version && this.value) return this.value;
    const text = await this.redis.get(this.key);
    if (!text) return this.value;
    this.value = parseLosslessJson(text) as T;
    this.version = version;
    return this.value;
  }
}

/** An engine's `/embeddings` and its model folders (`/models`) with each folder's files. */
export interface EngineModels {
  embeddings: string[];
  folders: Record<string, string[]>;
}
