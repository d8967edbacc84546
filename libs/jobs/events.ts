import type { Redis } from 'ioredis';
import type { JobKeys } from './keys.js';

export type JobEventName = 'status' | 'progress' | 'preview' | 'output' | 'log';

export interface StoredJobEvent {
  /** Redis stream id: the SSE `id:` and `Last-Event-ID`. */
  id: string;
  event: JobEventName;
  /** JSON text of the event's data. */
  data: string;
}

export interface PublishedJobEvent extends StoredJobEvent {
  jobId: string;
  accountId: string;
}

/**
 * The log keeps a job's latest events only: progress, previews and log lines come several times a
 * second, and a job of hours would otherwise grow without bound. Status changes and outputs, the
 * events a client cannot do without, are few; each is also written, with the same id, to a second
 * stream that is never trimmed, so a client resuming from before the kept window still gets them.
 */
const MAX_EVENTS_PER_JOB = 5_000;
const KEPT_EVENTS = new Set<JobEventName>(['status', 'output']);
const STREAM_ID = /^\d{1,20}-\d{1,20}$/;

const MAX_ID_PART = 2n ** 64n - 1n;

/** An id Redis can take as an exclusive range start: two 64-bit parts, below the largest id. */
export function isStreamId(value: string): boolean {
  if (!STREAM_ID.test(value)) return false;
  const [ms, seq] = value.split('-').map(BigInt) as [bigint, bigint];
  return ms <= MAX_ID_PART && seq <= MAX_ID_PART && !(ms === MAX_ID_PART && seq === MAX_ID_PART);
}

/**
 * Event ids on the wire (SSE `id:`, Last-Event-ID). A logged event's id is its stream id with the
 * sequence scaled by DERIVED_SLOTS (`ms-seq` becomes `ms-seq·2^20`; mostly `ms-0` either way). That
 * leaves room, after each logged event, for the events a stream sends of its own between two logged
 * ones (a queue position, a status read from the job's row): `ms-(seq·2^20 + n)`. So every event on
 * a stream has its own id, ids still look like stream ids and sort as the events were sent, and a
 * Last-Event-ID names the logged event it follows (parseEventId).
 */
const DERIVED_SLOTS = 2n ** 20n;

/** The wire id of a logged event (`derived` 0), or of the `derived`-th event a stream sent after it. */
export function eventIdOf(loggedId: string, derived = 0): string {
  const [ms, seq] = loggedId.split('-').map(BigInt) as [bigint, bigint];
  return `${ms}-${seq * DERIVED_SLOTS + BigInt(Math.min(derived, Number(DERIVED_SLOTS) - 1))}`;
}

/** A wire id: the logged event it is or follows, and how many events the stream sent after that one. */
export function parseEventId(wire: string): { after: string; derived: number } | null {
  if (!STREAM_ID.test(wire)) return null;
  const [ms, seq] = wire.split('-').map(BigInt) as [bigint, bigint];
  if (ms > MAX_ID_PART || seq > MAX_ID_PART) return null;
  const after = `${ms}-${seq / DERIVED_SLOTS}`;
  return isStreamId(after) ? { after, derived: Number(seq % DERIVED_SLOTS) } : null;
}

/** Orders two stream ids as the log does: negative when `a` came first. */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? (as === bs ? 0 : as < bs ? -1 : 1) : am < bm ? -1 : 1;
}

// XADD, EXPIRE and PUBLISH in one round trip, atomically: a listener that sees the published
// event can always find it in the log, which is what makes Last-Event-ID resumption lossless.
// ARGV[7] set: a status or output event, kept again under the same id in the untrimmed stream.
// ARGV[8] set: a worker's event, logged only while its run still holds the job's lease (KEYS[4]).
// ARGV[9] set: the ended job (endedJobText), published on KEYS[5] just before the event, so a
// subscriber has it when the event arrives.
const PUBLISH_HELD = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PUBLISH', KEYS[2], ARGV[2])`;

const APPEND = `
if ARGV[8] ~= '' and redis.call('GET', KEYS[4]) ~= ARGV[8] then return false end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[2], 'd', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if ARGV[7] == '1' then
  redis.call('XADD', KEYS[3], id, 'e', ARGV[2], 'd', ARGV[3])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
if ARGV[9] ~= '' then redis.call('PUBLISH', KEYS[5], ARGV[5] .. '\\n' .. ARGV[9]) end
redis.call('PUBLISH', KEYS[2], id .. '\\n' .. ARGV[5] .. '\\n' .. ARGV[6] .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[3])
return id`;

// APPEND for several jobs in one call (a submission batch's `queued`): the same entries, ids and
// messages, at the cost of one command. KEYS: the channel, then each job's log and kept stream.
// ARGV: max events, event, data, retention ms, kept ('1'/'0'), then each job's id and account id.
const APPEND_TO_MANY = `
local n = (#KEYS - 1) / 2
local ids = {}
for i = 1, n do
  local log, kept = KEYS[2 * i], KEYS[2 * i + 1]
  local id = redis.call('XADD', log, 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[2], 'd', ARGV[3])
  redis.call('PEXPIRE', log, ARGV[4])
  if ARGV[5] == '1' then
    redis.call('XADD', kept, id, 'e', ARGV[2], 'd', ARGV[3])
    redis.call('PEXPIRE', kept, ARGV[4])
  end
  redis.call('PUBLISH', KEYS[1], id .. '\\n' .. ARGV[4 + 2 * i] .. '\\n' .. ARGV[5 + 2 * i] .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[3])
  ids[i] = id
end
return ids`;

/** The per-job event log (a Redis stream) with live fan-out to every API replica over pub/sub. */
export class JobEventLog {
  constructor(
    private readonly redis: Redis,
    private readonly keys: JobKeys,
    private readonly retentionMs: number,
    private readonly maxEvents = MAX_EVENTS_PER_JOB,
  ) {
    // Defined before any command is sent: an auto-pipeline made earlier would not know them.
    if (!(redis as Redis & { appendJobEvent?: unknown }).appendJobEvent) {
      redis.defineCommand('appendJobEvent', { numberOfKeys: 5, lua: APPEND });
      redis.defineCommand('publishIfLeased', { numberOfKeys: 2, lua: PUBLISH_HELD });
      redis.defineCommand('appendJobEvents', { lua: APPEND_TO_MANY });
    }
  }

  /** Publishes a run's message for the account's v1 sockets, only while the run still holds its job's lease. */
  async publishLeased(message: AccountMessage, lease: string): Promise<void> {
    const r = this.redis as Redis & { publishIfLeased(...args: string[]): Promise<number> };
    await r.publishIfLeased(this.keys.lease(message.jobId), this.keys.accountChannel, lease, JSON.stringify(message));
  }

  /**
   * Logs and publishes one event; its id, or null when `lease` is given and no longer held: a run
   * whose job another worker has taken over reports nothing more.
   */
  append(jobId: string, accountId: string, event: JobEventName, data: unknown): Promise<string>;
  append(jobId: string, accountId: string, event: JobEventName, data: unknown, lease: string): Promise<string | null>;
  async append(jobId: string, accountId: string, event: JobEventName, data: unknown, lease?: string): Promise<string | null> {
    return this.appendWith(jobId, accountId, event, data, lease ?? '', '');
  }

  /**
   * A run's terminal status event (as `append` with its lease), with the job as the run ended it
   * (`ended`, endedJobText): published to the API replicas only, where a request waiting for the
   * job's end answers with it instead of reading the job back. The logged event is as ever.
   */
  async appendEnded(jobId: string, accountId: string, data: { status: string; queue_position: null }, lease: string, ended: string): Promise<string | null> {
    return this.appendWith(jobId, accountId, 'status', data, lease, ended);
  }

  private appendWith(jobId: string, accountId: string, event: JobEventName, data: unknown, lease: string, ended: string): Promise<string | null> {
    const r = this.redis as Redis & { appendJobEvent(...args: (string | number)[]): Promise<string | null> };
    return r.appendJobEvent(
      this.keys.events(jobId),
      this.keys.jobEventsChannel,
      this.keys.keptEvents(jobId),
      this.keys.lease(jobId),
      this.keys.jobEndedChannel,
      this.maxEvents,
      event,
      JSON.stringify(data),
      this.retentionMs,
      jobId,
      accountId,
      KEPT_EVENTS.has(event) ? '1' : '0',
      lease,
      ended,
    );
  }

  /**
   * Logs and publishes the same event for several jobs in one command, as `append` would one by
   * one (no lease: the API's events); their ids, in order.
   */
  async appendToMany(jobs: Array<{ jobId: string; accountId: string }>, event: JobEventName, data: unknown): Promise<string[]> {
    if (jobs.length === 0) return [];
    const r = this.redis as Redis & { appendJobEvents(...args: (string | number)[]): Promise<string[]> };
    const keys = jobs.flatMap(({ jobId }) => [this.keys.events(jobId), this.keys.keptEvents(jobId)]);
    const perJob = jobs.flatMap(({ jobId, accountId }) => [jobId, accountId]);
    return r.appendJobEvents(keys.length + 1, this.keys.jobEventsChannel, ...keys, this.maxEvents, event, JSON.stringify(data), this.retentionMs, KEPT_EVENTS.has(event) ? '1' : '0', ...perJob);
  }

  /** Whether the job's log has issued `id`: it is no later than the log's newest entry. */
  async issued(jobId: string, id: string): Promise<boolean> {
    const newest = await this.redis.xrevrange(this.keys.events(jobId), '+', '-', 'COUNT', 1);
    return newest.length > 0 && compareStreamIds(id, newest[0]![0]) <= 0;
  }

  /**
   * Events after `afterId` (exclusive), oldest first. Where the log has been trimmed past
   * `afterId`, the status and output events of the trimmed part come first, from the kept stream.
   */
  async since(jobId: string, afterId?: string): Promise<StoredJobEvent[]> {
    const start = afterId && isStreamId(afterId) ? `(${afterId}` : '-';
    const [logged, kept] = (await this.redis
      .multi()
      .xrange(this.keys.events(jobId), start, '+')
      .xrange(this.keys.keptEvents(jobId), start, '+')
      .exec()) as [[Error | null, [string, string[]][]], [Error | null, [string, string[]][]]];
    if (logged[0] || kept[0]) throw logged[0] ?? kept[0];
    const rows = logged[1];
    // Every kept event after `afterId` is in the log too, unless the log lost it to trimming:
    // those are exactly the kept ones older than the log's first remaining entry.
    const firstLogged = rows[0]?.[0];
    const trimmed = kept[1].filter(([id]) => firstLogged === undefined || compareStreamIds(id, firstLogged) < 0);
    return [...trimmed, ...rows].map(([id, fields]) => ({ id, event: fields[1] as JobEventName, data: fields[3] ?? 'null' }));
  }

  async latest(jobId: string, event: JobEventName): Promise<StoredJobEvent | null> {
    // Events of one kind are interleaved with others; scan back a bounded window.
    const rows = await this.redis.xrevrange(this.keys.events(jobId), '+', '-', 'COUNT', 500);
    for (const [id, fields] of rows) if (fields[1] === event) return { id, event, data: fields[3] ?? 'null' };
    return null;
  }

  async drop(jobId: string): Promise<void> {
    await this.redis.del(this.keys.events(jobId), this.keys.keptEvents(jobId));
  }
}

export function parsePublishedJobEvent(message: string): PublishedJobEvent | null {
  const parts = message.split('\n');
  if (parts.length < 5) return null;
  const [id, jobId, accountId, event] = parts as [string, string, string, JobEventName];
  return { id, jobId, accountId, event, data: parts.slice(4).join('\n') };
}

/** Engine-style messages for the v1 WebSocket, fanned out per account. */
export interface AccountMessage {
  accountId: string;
  /** The job it is about: a deployment's sockets get its own jobs' messages only. */
  jobId: string;
  /** A JSON text frame (`{type, data}`), or a preview image for a binary frame. */
  text?: string;
  preview?: { imageType: 'jpeg' | 'png'; base64: string; metadata: Record<string, unknown> };
  /** A node's progress text, for a TEXT binary frame (type 3); partner nodes report this way. */
  progressText?: { nodeId: string; text: string };
}

export async function publishAccountMessage(redis: Redis, keys: JobKeys, message: AccountMessage): Promise<void> {
  await redis.publish(keys.accountChannel, JSON.stringify(message));
}
