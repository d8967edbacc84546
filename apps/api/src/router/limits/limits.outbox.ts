import type { Redis } from 'ioredis';
import { ACQUIRE, RELEASE } from './limits.scripts.js';

/** A workspace's limit keys and limits, as the acquire script takes them. */
export interface WorkspaceLimits {
  keys: { inflight: string; spend: string; window: string };
  /** maxConcurrent, spendCap, windowCalls, windowMs, leaseMs. */
  limits: [number, number, number, number, number];
}

export type Verdict = [string, number, number];

type Done<T> = (err: Error | null, value?: T) => void;

interface Acquire {
  slotId: string;
  costCents: number;
  done: Done<Verdict>;
}

interface Release {
  slotId: string;
  done: Done<void>;
}

type ScriptPipeline = ReturnType<Redis['pipeline']> & {
  routerAcquire(inflight: string, spend: string, window: string, ...args: (string | number)[]): unknown;
  routerRelease(inflight: string, spend: string, ...slots: string[]): unknown;
};

// unpack() in Redis's Lua takes a few thousand values at most; a script gets this many calls.
const MAX_PER_SCRIPT = 500;

/**
 * The limits commands of one turn of the event loop, sent together at its end: one pipeline (one
 * socket write) for the turn, and one script per workspace for its releases and one for its
 * acquires. On loopback a write costs the sender the receiver's side of TCP too, and in Redis a
 * script's own cost is several times that of its commands: per call, a write and a script each
 * were a tenth of the API's and most of Redis's CPU time at 64 callers. Releases go first: they
 * were asked for before any acquire of the turn could be answered.
 */
export class LimitsOutbox {
  private acquires = new Map<string, { workspace: WorkspaceLimits; calls: Acquire[] }>();
  private releases = new Map<string, { workspace: WorkspaceLimits['keys']; calls: Release[] }>();
  private scheduled = false;

  constructor(private readonly redis: Redis) {
    redis.defineCommand('routerAcquire', { numberOfKeys: 3, lua: ACQUIRE });
    redis.defineCommand('routerRelease', { numberOfKeys: 2, lua: RELEASE });
  }

  acquire(workspace: WorkspaceLimits, slotId: string, costCents: number): Promise<Verdict> {
    return new Promise((resolve, reject) => {
      // Calls of one workspace under other limits (its cache reloaded within the turn) are decided apart.
      const group = `${workspace.keys.inflight} ${workspace.limits.join(' ')}`;
      let pending = this.acquires.get(group);
      if (!pending) this.acquires.set(group, (pending = { workspace, calls: [] }));
      pending.calls.push({ slotId, costCents, done: (err, verdict) => (err ? reject(err) : resolve(verdict!)) });
      this.schedule();
    });
  }

  release(keys: WorkspaceLimits['keys'], slotId: string): Promise<void> {
    return new Promise((resolve, reject) => {
      let pending = this.releases.get(keys.inflight);
      if (!pending) this.releases.set(keys.inflight, (pending = { workspace: keys, calls: [] }));
      pending.calls.push({ slotId, done: (err) => (err ? reject(err) : resolve()) });
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
    const pipeline = this.redis.pipeline() as ScriptPipeline;
    // One entry per script sent: what to do with its reply (or its error).
    const answers: ((err: Error | null, reply: unknown) => void)[] = [];
    for (const { workspace, calls } of this.releases.values()) {
      for (const part of chunks(calls)) {
        pipeline.routerRelease(workspace.inflight, workspace.spend, ...part.map((c) => c.slotId));
        answers.push((err) => part.forEach((c) => c.done(err)));
      }
    }
    for (const { workspace, calls } of this.acquires.values()) {
      const { inflight, spend, window } = workspace.keys;
      for (const part of chunks(calls)) {
        pipeline.routerAcquire(inflight, spend, window, ...workspace.limits, ...part.flatMap((c) => [c.slotId, c.costCents]));
        answers.push((err, reply) => {
          const flat = reply as (string | number)[] | undefined;
          part.forEach((c, i) => {
            if (err || !flat || flat.length !== part.length * 3) c.done(err ?? new Error('Redis sent no verdict'));
            else c.done(null, [String(flat[3 * i]), Number(flat[3 * i + 1]), Number(flat[3 * i + 2])]);
          });
        });
      }
    }
    this.releases = new Map();
    this.acquires = new Map();
    pipeline.exec().then(
      (replies) => answers.forEach((answer, i) => answer(replies?.[i] ? replies[i]![0] : new Error('Redis sent no reply'), replies?.[i]?.[1])),
      (err: Error) => answers.forEach((answer) => answer(err, undefined)),
    );
  }
}

function chunks<T>(items: T[]): T[][] {
  if (items.length <= MAX_PER_SCRIPT) return [items];
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += MAX_PER_SCRIPT) out.push(items.slice(i, i + MAX_PER_SCRIPT));
  return out;
}
