import type { Redis } from 'ioredis';
import { LEASE } from './limits.scripts.js';
import type { LeaseAsk, LeaseGrant, WorkspaceLease } from './workspace-lease.js';

export type Verdict = [string, number, number];

type Done<T> = (err: Error | null, value?: T) => void;

interface Acquire {
  costCents: number;
  done: Done<Verdict>;
}

type ScriptPipeline = ReturnType<Redis['pipeline']> & {
  routerLease(inflight: string, slots: string, spend: string, window: string, ...args: (string | number)[]): unknown;
};

// A script decides this many calls at most (Redis serves no one else while it runs); the rest of a
// workspace's burst waits for the next script.
const MAX_PER_SCRIPT = 500;

/**
 * The lease scripts of one turn of the event loop, sent together at its end: one pipeline (one
 * socket write) for the turn, and one script per workspace deciding all its calls of the turn that
 * the replica's holding could not cover. On loopback a write costs the sender the receiver's side
 * of TCP too, and in Redis a script's own cost is several times that of its commands.
 */
export class LimitsOutbox {
  private acquires = new Map<WorkspaceLease, Acquire[]>();
  /** Workspaces with an acquire script in flight. */
  private readonly asking = new Set<WorkspaceLease>();
  private refreshes: { lease: WorkspaceLease; ask: LeaseAsk; done: Done<LeaseGrant> }[] = [];
  private scheduled = false;

  constructor(
    private readonly redis: Redis,
    /** This replica's name in Redis's holdings. */
    private readonly holder: string,
    private readonly leaseMs: number,
  ) {
    redis.defineCommand('routerLease', { numberOfKeys: 4, lua: LEASE });
  }

  /** Asks Redis to decide a call the holding could not cover; the lease takes the answer first. */
  acquire(lease: WorkspaceLease, costCents: number): Promise<Verdict> {
    return new Promise((resolve, reject) => {
      let pending = this.acquires.get(lease);
      if (!pending) this.acquires.set(lease, (pending = []));
      pending.push({ costCents, done: (err, verdict) => (err ? reject(err) : resolve(verdict!)) });
      this.schedule();
    });
  }

  /** Sends a refresh the lease asked for (WorkspaceLease.refreshAsk or releaseAsk). */
  refresh(lease: WorkspaceLease, ask: LeaseAsk): Promise<LeaseGrant> {
    return new Promise((resolve, reject) => {
      this.refreshes.push({ lease, ask, done: (err, grant) => (err ? reject(err) : resolve(grant!)) });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    // Only acquires of workspaces still waiting for their last script: nothing to send yet.
    if (this.refreshes.length === 0 && [...this.acquires.keys()].every((lease) => this.asking.has(lease))) return;
    const pipeline = this.redis.pipeline() as ScriptPipeline;
    // One entry per script sent: what to do with its reply (or its error).
    const answers: ((err: Error | null, reply: unknown) => void)[] = [];
    // Refreshes first: they were asked before any acquire of the turn could be answered.
    for (const { lease, ask, done } of this.refreshes) {
      this.send(pipeline, lease, ask, []);
      answers.push((err, reply) => {
        const flat = reply as (string | number)[] | undefined;
        if (err || !flat || flat.length !== GRANT_LENGTH) done(err ?? new Error('Redis sent no holding'));
        else done(null, grantOf(flat, 0));
      });
    }
    this.refreshes = [];
    const now = performance.now();
    for (const [lease, calls] of this.acquires) {
      // One acquire script per workspace at a time: the next one's ask counts what this one admits.
      if (this.asking.has(lease)) continue;
      this.asking.add(lease);
      const part = calls.splice(0, MAX_PER_SCRIPT);
      if (calls.length === 0) this.acquires.delete(lease);
      const costs = part.map((c) => c.costCents);
      this.send(pipeline, lease, lease.askFor(costs, now), costs);
      answers.push((err, reply) => {
        this.asking.delete(lease);
        if (this.acquires.has(lease)) this.schedule();
        const flat = reply as (string | number)[] | undefined;
        if (err || !flat || flat.length !== part.length * 3 + GRANT_LENGTH) {
          part.forEach((c) => c.done(err ?? new Error('Redis sent no verdict')));
          return;
        }
        const verdicts: Verdict[] = part.map((_, i) => [String(flat[3 * i]), Number(flat[3 * i + 1]), Number(flat[3 * i + 2])]);
        lease.granted(grantOf(flat, part.length * 3), costs.filter((_, i) => verdicts[i]![0] === 'ok'), performance.now());
        part.forEach((c, i) => c.done(null, verdicts[i]));
      });
    }
    pipeline.exec().then(
      (replies) => answers.forEach((answer, i) => answer(replies?.[i] ? replies[i]![0] : new Error('Redis sent no reply'), replies?.[i]?.[1])),
      (err: Error) => answers.forEach((answer) => answer(err, undefined)),
    );
  }

  private send(pipeline: ScriptPipeline, lease: WorkspaceLease, ask: LeaseAsk, costs: number[]): void {
    const { inflight, slots, spend, window } = lease.keys;
    const { maxConcurrent, spendCap, windowCalls, windowMs } = lease.limits;
    pipeline.routerLease(
      inflight,
      slots,
      spend,
      window,
      maxConcurrent,
      spendCap,
      windowCalls,
      windowMs,
      this.leaseMs,
      this.holder,
      ask.usedSlots,
      ask.usedCents,
      ask.floorSlots,
      ask.floorCents,
      ask.heldWindowStart,
      ask.windowReturned,
      ask.wantSlots,
      ask.wantCents,
      ask.wantWindow,
      ...costs,
    );
  }
}

const GRANT_LENGTH = 8;

function grantOf(flat: (string | number)[], at: number): LeaseGrant {
  const [slots, cents, reserveSlots, reserveCents, share, windowStart, windowMsLeft, contended] = flat.slice(at, at + GRANT_LENGTH).map(Number) as number[];
  return { slots: slots!, cents: cents!, reserveSlots: reserveSlots!, reserveCents: reserveCents!, share: share!, windowStart: windowStart!, windowMsLeft: windowMsLeft!, contended: contended === 1 };
}
