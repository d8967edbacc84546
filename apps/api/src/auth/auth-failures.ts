import type { IncomingMessage } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import { componentLogger } from '#libs/logging';
import { CONFIG, REDIS } from '../core/tokens.js';

// Brute-force guard: failed authentications are counted per client address in Redis, so the count
// holds across replicas. The window starts at an address's first failure; once the address has
// used up its allowance, every attempt from it (a valid credential too) is refused until the
// window ends. Only presented credentials count: a request without one guesses nothing.

// INCR and the expiry of a new window in one step, so a counter can never live forever.
const COUNT_SCRIPT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}`;
// How long this replica believes "not blocked" before asking Redis again: one read per address
// per second at most, instead of one per request. A block this replica counts applies at once.
const CLEAR_FOR_MS = 1_000;
const MAX_ENTRIES = 10_000;

/**
 * The client address of a request that Fastify does not route (the v1 WebSocket upgrade), the
 * way Fastify computes `request.ip` with `trustProxy: hops`: the peer, or with trusted proxies in
 * front, the address `hops` steps back along X-Forwarded-For.
 */
export function clientAddress(request: IncomingMessage, hops: number): string {
  const peer = request.socket.remoteAddress ?? '';
  if (hops <= 0) return peer;
  const header = request.headers['x-forwarded-for'];
  const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((a) => a.trim())
    .filter(Boolean)
    .reverse();
  const chain = [peer, ...forwarded];
  return chain[Math.min(hops, chain.length - 1)]!;
}

@Injectable()
export class AuthFailures {
  private readonly logger = componentLogger('AuthFailures');
  private readonly blockedUntil = new Map<string, number>();
  private readonly clearUntil = new Map<string, number>();

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  private key(source: string): string {
    return `${this.config.redisPrefix}:authfail:${source}`;
  }

  private remember(map: Map<string, number>, source: string, until: number): void {
    if (map.size >= MAX_ENTRIES) map.clear();
    map.set(source, until);
  }

  private secondsLeft(until: number, now: number): number {
    return Math.max(1, Math.ceil((until - now) / 1000));
  }

  /** Seconds this address must wait before it may authenticate again; null when it may now. */
  async blockedFor(source: string): Promise<number | null> {
    const { limit } = this.config.authFailures;
    if (limit === 0) return null;
    const now = Date.now();
    const blocked = this.blockedUntil.get(source);
    if (blocked !== undefined) {
      if (blocked > now) return this.secondsLeft(blocked, now);
      this.blockedUntil.delete(source);
    }
    if ((this.clearUntil.get(source) ?? 0) > now) return null;
    let count = 0;
    let ttl = -2;
    try {
      const replies = await this.redis.multi().get(this.key(source)).pttl(this.key(source)).exec();
      count = Number(replies?.[0]?.[1] ?? 0);
      ttl = Number(replies?.[1]?.[1] ?? -2);
    } catch (err) {
      // The guard fails open: without Redis the request meets the account checks as before.
      this.logger.warn(`auth failure counter unavailable: ${(err as Error).message}`);
      return null;
    }
    if (count >= limit && ttl > 0) {
      this.remember(this.blockedUntil, source, now + ttl);
      return this.secondsLeft(now + ttl, now);
    }
    this.remember(this.clearUntil, source, now + CLEAR_FOR_MS);
    return null;
  }

  /** Counts one failed authentication of this address. */
  async failed(source: string): Promise<void> {
    const { limit, windowSeconds } = this.config.authFailures;
    if (limit === 0) return;
    this.clearUntil.delete(source);
    try {
      const [count, ttl] = (await this.redis.eval(COUNT_SCRIPT, 1, this.key(source), windowSeconds * 1000)) as [number, number];
      if (count >= limit && ttl > 0) this.remember(this.blockedUntil, source, Date.now() + ttl);
    } catch (err) {
      this.logger.warn(`auth failure not counted: ${(err as Error).message}`);
    }
  }

  /** The message of the 429, the same on every surface. */
  message(): string {
    const { limit, windowSeconds } = this.config.authFailures;
    return `${limit} failed authentication attempts from this address within ${windowSeconds} s; wait for Retry-After before trying again.`;
  }
}
