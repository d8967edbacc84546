import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Account } from '#libs/db';
import { addInflightSpend } from '#libs/metrics';
import { CONFIG } from '../../core/tokens.js';
import { RouterError } from '../errors.js';
import { LimitsOutbox, type Verdict, type WorkspaceLimits } from './limits.outbox.js';
import { RENEW } from './limits.scripts.js';

// A slot is held for the whole life of a call's provider generation. Its lease is renewed while
// the generation runs, so a replica that dies mid-call frees its slots within one lease.
const LEASE_MS = 30_000;
const RENEW_EVERY_MS = 10_000;

type LimitCommands = Redis & {
  routerRenew(inflight: string, spend: string, ...args: (string | number)[]): Promise<number>;
};

export interface Slot {
  id: string;
  accountId: string;
  /** What the call committed: released with the slot (and shown as in-flight spend meanwhile). */
  costCents: number;
}

@Injectable()
export class LimitsService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('RouterLimits');
  private readonly redis: LimitCommands;
  /** Slots this process holds, by account: what the renewal timer extends. */
  private readonly held = new Map<string, Set<string>>();
  /** Releases that failed while Redis was away; sent again when it is back (else the lease ends them). */
  private readonly unreleased: Slot[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly outbox: LimitsOutbox;

  constructor(@Inject(CONFIG) private readonly config: Config) {
    // A connection of its own, not auto-pipelined: ioredis holds back an auto-pipeline while the
    // previous one awaits its replies, which under a burst of calls cost each acquire an extra
    // round trip (added p50 at 64 callers: 6-12 ms with it, 3-4 ms without). Commands are batched
    // per turn of the event loop instead (LimitsOutbox). No offline queue: with Redis away a call fails
    // fast (503).
    const redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    redis.on('ready', () => {
      for (const slot of this.unreleased.splice(0, this.unreleased.length)) this.sendRelease(slot);
    });
    redis.defineCommand('routerRenew', { numberOfKeys: 2, lua: RENEW });
    this.redis = redis as LimitCommands;
    this.outbox = new LimitsOutbox(redis);
  }

  async onModuleInit(): Promise<void> {
    this.timer = setInterval(() => void this.renewAll(), RENEW_EVERY_MS);
    this.timer.unref();
    // Serve from the first request on when Redis is there; without it, start anyway (calls get 503).
    if (this.redis.status !== 'ready') {
      await new Promise<void>((resolve) => {
        const done = setTimeout(resolve, 5_000);
        this.redis.once('ready', () => {
          clearTimeout(done);
          resolve();
        });
      });
    }
  }

  // Not before the HTTP server has drained: calls that finish during a stop release their slots.
  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  private keys(accountId: string): WorkspaceLimits['keys'] {
    const base = `${this.config.redisPrefix}:router:{${accountId}}`;
    return { inflight: `${base}:inflight`, spend: `${base}:spend`, window: `${base}:window` };
  }

  /** Takes a slot for a call costing `costCents`, or throws the bucket the workspace hit. */
  async acquire(account: Account, slotId: string, costCents: number): Promise<Slot> {
    const workspace: WorkspaceLimits = {
      keys: this.keys(account.id),
      limits: [account.routerMaxConcurrent, account.routerSpendCapCents, account.routerWindowCalls, Math.max(1, account.routerWindowSeconds) * 1000, LEASE_MS],
    };
    let verdict: Verdict;
    try {
      verdict = await this.outbox.acquire(workspace, slotId, costCents);
    } catch (err) {
      this.logger.warn(`limits unavailable: ${(err as Error).message}`);
      throw new RouterError('service_unavailable', 'The router cannot check its limits right now; retry with backoff.', { 'retry-after': '1' });
    }
    const [kind, a, b] = verdict;
    if (kind === 'rate_limited') {
      const seconds = Math.max(1, Math.ceil(Number(b) / 1000));
      throw new RouterError(
        'rate_limited',
        `The workspace used its allowance of ${account.routerWindowCalls} calls per ${account.routerWindowSeconds}-second window; the window rolls over in ${seconds} s.`,
        { 'retry-after': String(seconds) },
      );
    }
    if (kind === 'concurrency') {
      throw new RouterError(
        'concurrency_limit_exceeded',
        `Concurrent calls limit reached: the workspace has ${a} calls in flight (limit ${account.routerMaxConcurrent}); retry when one of them finishes.`,
        { 'retry-after': '1' },
      );
    }
    if (kind === 'spend') {
      const current = Number(a);
      const cap = account.routerSpendCapCents;
      throw new RouterError(
        'concurrency_limit_exceeded',
        `Committed spend limit reached: in-flight calls have committed ${current} of ${cap} US cents and this call would commit ${costCents} more; retry when one of them finishes.`,
        {
          'retry-after': '1',
          'x-committed-spend-limit': String(cap),
          'x-committed-spend-current': String(current),
          'x-committed-spend-remaining': String(Math.max(0, cap - current)),
        },
      );
    }
    let mine = this.held.get(account.id);
    if (!mine) this.held.set(account.id, (mine = new Set()));
    mine.add(slotId);
    addInflightSpend(costCents);
    return { id: slotId, accountId: account.id, costCents };
  }

  /**
   * Frees the slot. Not awaited on the hot path: commands on one connection run in order, so this
   * process's next acquire already sees it; a failure leaves the lease to expire.
   */
  release(slot: Slot): void {
    addInflightSpend(-slot.costCents);
    const mine = this.held.get(slot.accountId);
    mine?.delete(slot.id);
    if (mine?.size === 0) this.held.delete(slot.accountId);
    this.sendRelease(slot);
  }

  /** The Redis half of a release; sent again once Redis is back if it fails. */
  private sendRelease(slot: Slot): void {
    this.outbox.release(this.keys(slot.accountId), slot.id).catch((err: Error) => {
      this.logger.warn(`slot ${slot.id} not released yet: ${err.message}`);
      if (this.unreleased.length < 100_000) this.unreleased.push(slot);
    });
  }

  private async renewAll(): Promise<void> {
    for (const [accountId, slots] of this.held) {
      if (slots.size === 0) continue;
      const { inflight, spend } = this.keys(accountId);
      await this.redis.routerRenew(inflight, spend, LEASE_MS, ...slots).catch((err: Error) => this.logger.warn(`lease renewal failed: ${err.message}`));
    }
  }
}
