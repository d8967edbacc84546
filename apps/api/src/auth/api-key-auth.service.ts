import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Redis } from 'ioredis';
import { hashApiKey, looksLikeApiKey } from '#libs/auth';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account, Db } from '#libs/db';
import { CONFIG, DB } from '../core/tokens.js';

const CACHE_MS = 5_000;

export function authChangedChannel(prefix: string): string {
  return `${prefix}:auth:changed`;
}

/**
 * Resolves an API key to its account. Lookups are cached for a few seconds to keep the hot path
 * off the database; the admin command line publishes on a Redis channel whenever keys or accounts
 * change, which empties every replica's cache at once, so a revoked key stops working immediately.
 */
@Injectable()
export class ApiKeyAuthService implements OnModuleInit, OnApplicationShutdown {
  private readonly cache = new Map<string, { account: Account | null; until: number }>();
  private subscriber: Redis | null = null;

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  async onModuleInit(): Promise<void> {
    this.subscriber = new Redis(this.config.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
    this.subscriber.on('message', () => this.cache.clear());
    // Whenever the subscription is (re)established, changes may have been missed: start afresh.
    this.subscriber.on('ready', () => this.cache.clear());
    this.subscriber.on('error', () => undefined);
    await this.subscriber.connect().catch(() => undefined);
    await this.subscriber.subscribe(authChangedChannel(this.config.redisPrefix)).catch(() => undefined);
  }

  // Closed only once the HTTP server has drained: requests in flight during a stop still use it.
  onApplicationShutdown(): void {
    this.subscriber?.disconnect();
  }

  async authenticate(key: string | undefined | null): Promise<Account | null> {
    if (!key || !looksLikeApiKey(key)) return null;
    const hash = hashApiKey(key);
    const now = Date.now();
    const cached = this.cache.get(hash);
    if (cached && cached.until > now) return cached.account;
    // A lookup that fails says nothing about the key: the client gets 503, never a 401 for a good key.
    const row = await this.db.apiKey.findUnique({ where: { hash }, include: { account: true } }).catch(() => {
      throw new ApiError('service_unavailable', 'A dependency is temporarily unavailable; retry shortly.', undefined, { 'retry-after': '1' });
    });
    const account = row && row.revokedAt === null ? row.account : null;
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hash, { account, until: now + CACHE_MS });
    return account;
  }

  /** Drops cached lookups of this process (tests and the account-changing code paths call it). */
  forget(): void {
    this.cache.clear();
  }
}
