import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Account } from '#libs/db';
import { addInflightSpend } from '#libs/metrics';
import { componentLogger } from '#libs/logging';
import { CONFIG } from '../../core/tokens.js';
import { RouterError } from '../errors.js';
import { LimitsOutbox, type Verdict } from './limits.outbox.js';
import { WorkspaceLease, type WorkspaceKeys, type WorkspaceLimits } from './workspace-lease.js';

// A replica's holding of a workspace's limits lives this long in Redis unless renewed (it is,
// while the replica lives): a replica that dies frees what it held within one lease.
const LEASE_MS = 30_000;
// How often holdings are looked at: renewed, their reserve checked, shrunk, given back when idle.
const TICK_MS = 100;

export interface Slot {
  accountId: string;
  /** What the call committed: released with the slot (and shown as in-flight spend meanwhile). */
  costCents: number;
}

/**
 * The workspace limits (concurrent calls, committed spend, windowed allowance), atomic across API
 * replicas through Redis. Each replica holds a part of every busy workspace's limits and admits
 * calls against it without a round trip (WorkspaceLease); Redis decides, exactly, the calls a
 * holding cannot cover.
 *
 * Custom on purpose: rate-limit libraries count requests per key in a window; these limits also
 * hold concurrency slots and committed cents until a call ends, leased so that a replica that dies
 * frees what it held, and held locally so that admitting a call costs no round trip.
 */
@Injectable()
export class LimitsService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = componentLogger('RouterLimits');
  private readonly redis: Redis;
  private readonly leases = new Map<string, WorkspaceLease>();
  private timer: NodeJS.Timeout | null = null;
  private refreshFailing = false;
  private readonly outbox: LimitsOutbox;

  constructor(@Inject(CONFIG) private readonly config: Config) {
    // A connection of its own, not auto-pipelined: ioredis holds back an auto-pipeline while the
    // previous one awaits its replies, which under a burst of calls cost each acquire an extra
    // round trip. Scripts are batched per turn of the event loop instead (LimitsOutbox). No offline
    // queue: with Redis away a call the holding cannot cover fails fast (503).
    const redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    this.redis = redis;
    this.outbox = new LimitsOutbox(redis, `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`, LEASE_MS);
  }

  async onModuleInit(): Promise<void> {
    this.timer = setInterval(() => this.tick(), TICK_MS);
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

  // Not before the HTTP server has drained: the holdings go back once no call is in flight.
  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await Promise.all(
      [...this.leases.values()].map((lease) => this.outbox.refresh(lease, lease.releaseAsk()).catch((err: Error) => this.logger.warn(`holding not given back: ${err.message}`))),
    );
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  private keys(accountId: string): WorkspaceKeys {
    const base = `${this.config.redisPrefix}:router:{${accountId}}`;
    return { inflight: `${base}:inflight`, slots: `${base}:slots`, spend: `${base}:spend`, window: `${base}:window` };
  }

  /** Takes a slot for a call costing `costCents`, or throws the bucket the workspace hit. */
  async acquire(account: Account, costCents: number): Promise<Slot> {
    const limits: WorkspaceLimits = {
      maxConcurrent: account.routerMaxConcurrent,
      spendCap: account.routerSpendCapCents,
      windowCalls: account.routerWindowCalls,
      windowMs: Math.max(1, account.routerWindowSeconds) * 1000,
    };
    let lease = this.leases.get(account.id);
    if (!lease) this.leases.set(account.id, (lease = new WorkspaceLease(this.keys(account.id), limits, LEASE_MS)));
    else lease.setLimits(limits);
    if (!lease.tryAdmit(costCents, performance.now())) this.refused(account, costCents, await this.ask(lease, costCents));
    addInflightSpend(costCents);
    return { accountId: account.id, costCents };
  }

  private async ask(lease: WorkspaceLease, costCents: number): Promise<Verdict> {
    lease.asking += 1;
    try {
      return await this.outbox.acquire(lease, costCents);
    } catch (err) {
      lease.failed();
      this.logger.warn(`limits unavailable: ${(err as Error).message}`);
      throw new RouterError('service_unavailable', 'The router cannot check its limits right now; retry with backoff.', { 'retry-after': '1' });
    } finally {
      lease.asking -= 1;
    }
  }

  /** Throws the bucket a refused verdict names; returns for an admitted call. */
  private refused(account: Account, costCents: number, [kind, a, b]: Verdict): void {
    if (kind === 'ok') return;
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
    // Not admitted on a verdict the script never gives: the call ends as internal_error.
    throw new Error(`unknown limits verdict ${kind}`);
  }

  /** Frees the slot: on this replica's holding, no round trip. */
  release(slot: Slot): void {
    addInflightSpend(-slot.costCents);
    const lease = this.leases.get(slot.accountId);
    if (!lease) return;
    lease.release(slot.costCents);
    // What the call held goes back at once when the holding is over its reserve (near a limit
    // Redis allows none): another replica's call can take it.
    if (lease.overReserve()) this.refresh(lease, performance.now());
  }

  /** Renews, shrinks or gives back holdings as their demand says (WorkspaceLease.refreshAsk). */
  private tick(): void {
    const now = performance.now();
    for (const [accountId, lease] of this.leases) {
      if (lease.empty()) this.leases.delete(accountId);
      else this.refresh(lease, now);
    }
  }

  private refresh(lease: WorkspaceLease, now: number): void {
    const ask = lease.refreshAsk(now);
    if (!ask) return;
    this.outbox.refresh(lease, ask).then(
      (grant) => {
        this.refreshFailing = false;
        lease.refreshed(grant, performance.now());
        if (lease.overReserve()) this.refresh(lease, performance.now());
      },
      (err: Error) => {
        lease.refreshing = false;
        lease.failed();
        // Once per outage, not every tick.
        if (!this.refreshFailing) this.logger.warn(`holdings not refreshed: ${err.message}`);
        this.refreshFailing = true;
      },
    );
  }
}
