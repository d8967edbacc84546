import type { Redis } from 'ioredis';
import type { JobKeys } from './keys.js';
import { leaseToken, type RunLease } from './state.js';

/**
 * How long a lease that a later attempt ended, or that the sweeper took back, stays on record. A
 * run paused in the middle of its start (a frozen VM, SIGSTOP, a long collection) may come back
 * that much later and must still find it.
 */
const FENCE_MS = 24 * 3600 * 1000;

/**
 * Sets a run's lease unless an attempt as late as its own already holds the job or ended it. The
 * value is `worker/attempt` (leaseToken) for a run, the bare attempt once the run is over: no run's
 * token equals it, and either way the trailing digits are the attempt.
 * KEYS: the lease. ARGV: token, attempt, ms. 1 when set.
 */
const TAKE = `
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then
  local attempt = tonumber(string.match(held, '(%d+)$'))
  if attempt and attempt >= tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1`;

type LeaseCommands = { takeRunLease(key: string, token: string, attempt: number, ms: number): Promise<number> };

/**
 * The Redis side of a run's lease, which fences its events and v1 messages (JobEventLog): only
 * the run whose token the key holds may send any. A run sets it just after its claim, without
 * waiting; a run paused between its claim and that write would otherwise set it after another
 * worker had taken the job over and ended it, and its events would pass the fence. So the key
 * only ever moves to a later attempt, and a run that ends after a takeover, or a run the sweeper
 * takes back, leaves its attempt behind.
 */
export class RunLeases {
  constructor(
    private readonly redis: Redis,
    private readonly keys: JobKeys,
  ) {
    if (!(redis as Redis & Partial<LeaseCommands>).takeRunLease) redis.defineCommand('takeRunLease', { numberOfKeys: 1, lua: TAKE });
  }

  /** Whether the run now holds the key (false: a later attempt took the job over, or ended it). */
  async take(jobId: string, lease: RunLease, ms: number): Promise<boolean> {
    const r = this.redis as Redis & LeaseCommands;
    return Number(await r.takeRunLease(this.keys.lease(jobId), leaseToken(lease), lease.attempt, Math.max(1, Math.round(ms)))) === 1;
  }

  /**
   * The run of `attempt` ended its job or handed it back. Only an earlier attempt's run could
   * still come back, so a first attempt leaves nothing behind.
   */
  async end(jobId: string, attempt: number): Promise<void> {
    if (attempt <= 1) await this.redis.del(this.keys.lease(jobId));
    else await this.fence(jobId, attempt);
  }

  /** The sweeper took the job from the run of `attempt`, which may still be alive somewhere. */
  async takeBack(jobId: string, attempt: number): Promise<void> {
    await this.fence(jobId, attempt);
  }

  private async fence(jobId: string, attempt: number): Promise<void> {
    await this.redis.set(this.keys.lease(jobId), String(attempt), 'PX', FENCE_MS);
  }
}
