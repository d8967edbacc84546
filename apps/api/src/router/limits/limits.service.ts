import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Account } from '#libs/db';
import { addInflightSpend } from '#libs/metrics';
import { CONFIG } from '../../core/tokens.js';
import { RouterError } from '../errors.js';
import { ACQUIRE, RELEASE, RENEW } from './limits.scripts.js';

// A slot is held for the whole life of a call's provider generation. Its lease is renewed while
// the generation runs, so a replica that dies mid-call frees its slots within one lease.
const LEASE_MS = 30_000;
const RENEW_EVERY_MS = 10_000;

type LimitCommands = Redis & {
  routerRenew(inflight: string, spend: string, ...args: (string | number)[]): Promise<number>;
};

type Verdict = [string, number, number];

/** A command waiting for the next batch: its script, keys and arguments, and who waits for its reply. */
interface Outgoing {
  script: 'routerAcquire' | 'routerRelease';
  args: (string | number)[];
  done(err: Error | null, reply: unknown): void;
}

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
  /** Acquires and releases of this turn of the event loop, sent together (see `send`). */
  private outbox: Outgoing[] = [];

  constructor(@Inject(CONFIG) private readonly config: Config) {
    // A connection of its own, not auto-pipelined: ioredis holds back an auto-pipeline while the
    // previous one awaits its replies, which under a burst of calls cost each acquire an extra
    // round trip (added p50 at 64 callers: 6-12 ms with it, 3-4 ms without). Commands are batched
    // per turn of the event loop instead (`send`). No offline queue: with Redis away a call fails
    // fast (503).
    const redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    redis.on('ready', () => {
      for (const slot of this.unreleased.splice(0, this.unreleased.length)) this.sendRelease(slot);
    });
    redis.defineCommand('routerAcquire', { numberOfKeys: 3, lua: ACQUIRE });
    redis.defineCommand('routerRelease', { numberOfKeys: 2, lua: RELEASE });
    redis.defineCommand('routerRenew', { numberOfKeys: 2, lua: RENEW });
    this.redis = redis as LimitCommands;
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

  private keys(accountId: string): [string, string, string] {
    const base = `${this.config.redisPrefix}:router:{${accountId}}`;
    return [`${base}:inflight`, `${base}:spend`, `${base}:window`];
  }

  /** Takes a slot for a call costing `costCents`, or throws the bucket the workspace hit. */
  async acquire(account: Account, slotId: string, costCents: number): Promise<Slot> {
    const [inflight, spend, window] = this.keys(account.id);
    const windowMs = Math.max(1, account.routerWindowSeconds) * 1000;
    let verdict: Verdict;
    try {
      verdict = (await this.send('routerAcquire', [
        inflight,
        spend,
        window,
        slotId,
        costCents,
        account.routerMaxConcurrent,
        account.routerSpendCapCents,
        account.routerWindowCalls,
        windowMs,
        LEASE_MS,
      ])) as Verdict;
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
    const [inflight, spend] = this.keys(slot.accountId);
    this.send('routerRelease', [inflight, spend, slot.id]).catch((err: Error) => {
      this.logger.warn(`slot ${slot.id} not released yet: ${err.message}`);
      if (this.unreleased.length < 100_000) this.unreleased.push(slot);
    });
  }

  /**
   * Queues a limits script for the end of this turn of the event loop, when the commands of every
   * call that got this far in the turn leave in one pipeline: one socket write for a burst of
   * calls rather than one each. On loopback a write costs the sender the receiver's side of TCP
   * too; a write per command was a tenth of the API's CPU time per call at 64 callers. Order is
   * kept, so a release still reaches Redis before this process's later acquires.
   */
  private send(script: Outgoing['script'], args: (string | number)[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (this.outbox.length === 0) setImmediate(() => this.flush());
      this.outbox.push({ script, args, done: (err, reply) => (err ? reject(err) : resolve(reply)) });
    });
  }

  private flush(): void {
    const batch = this.outbox;
    this.outbox = [];
    const pipeline = this.redis.pipeline() as ReturnType<Redis['pipeline']> & Record<Outgoing['script'], (...args: (string | number)[]) => unknown>;
    for (const command of batch) pipeline[command.script](...command.args);
    pipeline.exec().then(
      (replies) =>
        batch.forEach((command, i) => {
          const reply = replies?.[i];
          command.done(reply ? reply[0] : new Error('Redis sent no reply'), reply?.[1]);
        }),
      (err: Error) => batch.forEach((command) => command.done(err, undefined)),
    );
  }

  private async renewAll(): Promise<void> {
    for (const [accountId, slots] of this.held) {
      if (slots.size === 0) continue;
      const [inflight, spend] = this.keys(accountId);
      await this.redis.routerRenew(inflight, spend, LEASE_MS, ...slots).catch((err: Error) => this.logger.warn(`lease renewal failed: ${err.message}`));
    }
  }
}
