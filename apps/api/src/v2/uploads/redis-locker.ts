import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ERRORS, type Lock, type Locker, type RequestRelease } from '@tus/utils';

const HOLD_MS = 15_000;
const RETRY_MS = 100;

// Deletes or extends the lock only while it is still this holder's.
const UNLOCK = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;
const EXTEND = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;

/**
 * The lock @tus/server takes on an upload while a request writes it, across API replicas: any
 * replica may serve any request of an upload, and a client that retries after a lost connection
 * may reach another replica while the first still holds the upload. @tus/server ships only an
 * in-process locker and no Redis one is maintained, hence this small one: a Redis key per upload
 * (set if absent, kept alive while held, removed on unlock), and a pub/sub message that asks the
 * holder to let go (the tus `cancelReq`), so the newer request gets the upload quickly.
 */
export class RedisLocker implements Locker {
  private readonly held = new Map<string, RequestRelease>();
  private subscribed: Promise<void> | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly subscriber: Redis,
    private readonly prefix: string,
    private readonly acquireTimeoutMs = 30_000,
  ) {
    subscriber.on('message', (channel: string, id: string) => {
      if (channel === this.channel) void this.held.get(id)?.();
    });
  }

  private get channel(): string {
    return `${this.prefix}:uploads:release`;
  }

  key(id: string): string {
    return `${this.prefix}:uploads:lock:${id}`;
  }

  newLock(id: string): Lock {
    this.subscribed ??= this.subscriber.subscribe(this.channel).then(() => undefined);
    return new RedisLock(this, id);
  }

  /** @internal */
  async tryAcquire(id: string, token: string): Promise<boolean> {
    return (await this.redis.set(this.key(id), token, 'PX', HOLD_MS, 'NX')) === 'OK';
  }

  /** @internal */
  async askRelease(id: string): Promise<void> {
    await this.subscribed;
    await this.redis.publish(this.channel, id);
  }

  /** @internal */
  track(id: string, release: RequestRelease | null): void {
    if (release) this.held.set(id, release);
    else this.held.delete(id);
  }

  /** @internal */
  extend(id: string, token: string): Promise<unknown> {
    return this.redis.eval(EXTEND, 1, this.key(id), token, String(HOLD_MS));
  }

  /** @internal */
  release(id: string, token: string): Promise<unknown> {
    return this.redis.eval(UNLOCK, 1, this.key(id), token);
  }

  get timeoutMs(): number {
    return this.acquireTimeoutMs;
  }
}

class RedisLock implements Lock {
  private readonly token = randomUUID();
  private keepAlive: NodeJS.Timeout | null = null;

  constructor(
    private readonly locker: RedisLocker,
    private readonly id: string,
  ) {}

  async lock(signal: AbortSignal, cancelReq: RequestRelease): Promise<void> {
    const deadline = Date.now() + this.locker.timeoutMs;
    let asked = false;
    while (!(await this.locker.tryAcquire(this.id, this.token))) {
      if (signal.aborted || Date.now() > deadline) throw ERRORS.ERR_LOCK_TIMEOUT;
      if (!asked) {
        asked = true;
        await this.locker.askRelease(this.id);
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
    this.locker.track(this.id, cancelReq);
    this.keepAlive = setInterval(() => void this.locker.extend(this.id, this.token).catch(() => undefined), HOLD_MS / 3);
  }

  async unlock(): Promise<void> {
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.keepAlive = null;
    this.locker.track(this.id, null);
    await this.locker.release(this.id, this.token);
  }
}
