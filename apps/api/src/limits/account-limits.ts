import { Inject, Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import { CONFIG, REDIS } from '../core/tokens.js';

const STREAM_TTL_MS = 60_000;

// INCRBY and the window's expiry in one script: unlike MULTI, a script call joins the connection's
// auto-pipeline. ARGV: ttl ms, how many requests.
const COUNT_REQUESTS = `
local n = redis.call('INCRBY', KEYS[1], ARGV[2])
if n == tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`;

type CountingRedis = Redis & { countRequests(key: string, ttlMs: number, n: number): Promise<number> };

interface Waiting {
  resolve: (count: number) => void;
  reject: (err: unknown) => void;
}

/** Per-account request rate and open event streams, counted in Redis so they hold across replicas. */
@Injectable()
export class AccountLimits {
  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    if (!(redis as Redis & { countRequests?: unknown }).countRequests) redis.defineCommand('countRequests', { numberOfKeys: 1, lua: COUNT_REQUESTS });
  }

  /** Requests waiting for their count, by window key, until the next turn of the event loop. */
  private pending = new Map<string, Waiting[]>();

  /**
   * The request's number in its window. The requests of an account that arrive in the same turn
   * of the event loop are counted by one INCRBY and numbered in arrival order, exactly as one INCR
   * each would number them: one Redis command per account and turn instead of one per request.
   */
  private count(key: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const waiting = this.pending.get(key);
      if (waiting) return void waiting.push({ resolve, reject });
      if (this.pending.size === 0) setImmediate(() => this.flush());
      this.pending.set(key, [{ resolve, reject }]);
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = new Map();
    for (const [key, waiting] of batch) {
      (this.redis as CountingRedis).countRequests(key, 61_000, waiting.length).then(
        (total) => waiting.forEach((w, i) => w.resolve(Number(total) - waiting.length + i + 1)),
        (err: unknown) => waiting.forEach((w) => w.reject(err)),
      );
    }
  }

  private rateKey(accountId: string, window: number): string {
    return `${this.config.redisPrefix}:rate:${accountId}:${window}`;
  }

  private streamsKey(accountId: string): string {
    return `${this.config.redisPrefix}:streams:${accountId}`;
  }

  /** A fixed one-minute window per account: 429 `rate_limited` with the seconds left in it. */
  async countRequest(account: Account): Promise<void> {
    const now = Date.now();
    const window = Math.floor(now / 60_000);
    const key = this.rateKey(account.id, window);
    const count = await this.count(key);
    if (count > account.requestsPerMinute) {
      const retry = Math.ceil(((window + 1) * 60_000 - now) / 1000);
      throw ApiError.retryAfter('rate_limited', `More than ${account.requestsPerMinute} requests in a minute.`, retry);
    }
  }

  /** What the account uses now of the two limits counted here: this minute's requests, its open streams. */
  async usage(account: Account): Promise<{ requestsThisMinute: number; openStreams: number }> {
    const now = Date.now();
    const [requests, streams] = await Promise.all([
      this.redis.get(this.rateKey(account.id, Math.floor(now / 60_000))),
      this.redis.zcount(this.streamsKey(account.id), now - STREAM_TTL_MS, '+inf'),
    ]);
    return { requestsThisMinute: Number(requests ?? 0), openStreams: streams };
  }

  /**
   * Registers an open stream; 429 `too_many_streams` past the account's limit. Streams refresh
   * their entry while open, so a replica that dies cannot hold slots for longer than a minute.
   */
  async openStream(account: Account, streamId: string): Promise<{ refresh(): Promise<void>; close(): Promise<void> }> {
    const key = this.streamsKey(account.id);
    const now = Date.now();
    const result = await this.redis
      .multi()
      .zremrangebyscore(key, 0, now - STREAM_TTL_MS)
      .zadd(key, now, streamId)
      .zcard(key)
      .pexpire(key, STREAM_TTL_MS * 2)
      .exec();
    const open = Number(result?.[2]?.[1] ?? 0);
    if (open > account.maxEventStreams) {
      await this.redis.zrem(key, streamId);
      throw ApiError.retryAfter('too_many_streams', `The account already has ${account.maxEventStreams} open event streams.`, 5);
    }
    return {
      refresh: async () => {
        await this.redis.zadd(key, Date.now(), streamId);
      },
      close: async () => {
        await this.redis.zrem(key, streamId);
      },
    };
  }
}
