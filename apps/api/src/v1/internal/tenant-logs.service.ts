import { Inject, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { LogEntry } from '#libs/engine-protocol';
import { JobStore, type JobScope } from '#libs/jobs';
import { CONFIG, REDIS } from '../../core/tokens.js';

/** The engine keeps its last 300 entries (app/logger.py); so does a tenant's log, within this many characters. */
export const LOG_ENTRIES = 300;
export const LOG_CHARACTERS = 1024 * 1024;
/** The terminal size the engine reports when it runs without one. */
export const TERMINAL_SIZE = { cols: 80, rows: 24 };
/** Client ids kept subscribed per account, and for how long without a renewal. */
const MAX_SUBSCRIBERS = 1000;
const SUBSCRIPTION_SECONDS = 24 * 3600;
const JOBS_PER_READ = 20;

/** A job's captured log as entries, one per line, stamped with the time it was captured. */
export function logEntries(text: string, capturedAt: Date): LogEntry[] {
  const t = capturedAt.toISOString();
  return (text.match(/[^\n]*\n|[^\n]+$/g) ?? []).map((m) => ({ t, m }));
}

/**
 * What a tenant sees of the engine's log: the lines its own jobs wrote (a worker captures them
 * per job, kept with the job when it ends), never the log of an engine, which every account's
 * jobs share. Clients that subscribe (`PATCH /internal/logs/subscribe`) get each job's lines over
 * the WebSocket when it ends; subscriptions live in Redis, as a socket and the request that
 * subscribes it may reach different replicas.
 */
@Injectable()
export class TenantLogs {
  constructor(
    private readonly jobs: JobStore,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  /** The newest entries of the scope's jobs, oldest first, as the engine's ring buffer holds them. */
  async recent(scope: JobScope): Promise<LogEntry[]> {
    const newestFirst: LogEntry[][] = [];
    let entries = 0;
    let characters = 0;
    for (let skip = 0; entries < LOG_ENTRIES && characters < LOG_CHARACTERS; skip += JOBS_PER_READ) {
      const jobs = await this.jobs.logsInScope(scope, skip, JOBS_PER_READ);
      for (const job of jobs) {
        const lines = logEntries(job.logText!, job.logCapturedAt!);
        newestFirst.push(lines);
        entries += lines.length;
        characters += job.logText!.length;
        if (entries >= LOG_ENTRIES || characters >= LOG_CHARACTERS) break;
      }
      if (jobs.length < JOBS_PER_READ) break;
    }
    const all = newestFirst.reverse().flat();
    let kept = all.slice(-LOG_ENTRIES);
    let size = kept.reduce((n, e) => n + e.m.length, 0);
    while (size > LOG_CHARACTERS && kept.length > 1) {
      size -= kept[0]!.m.length;
      kept = kept.slice(1);
    }
    return kept;
  }

  /** The lines one job wrote, for subscribed sockets when it ends. */
  async ofJob(jobId: string): Promise<LogEntry[]> {
    const job = await this.jobs.logOf(jobId);
    return job?.logText && job.logCapturedAt ? logEntries(job.logText, job.logCapturedAt) : [];
  }

  async subscribe(accountId: string, clientId: string, enabled: boolean): Promise<void> {
    const key = this.key(accountId);
    if (!enabled) {
      await this.redis.srem(key, clientId);
      return;
    }
    const count = await this.redis.scard(key);
    const pipeline = this.redis.multi();
    if (count >= MAX_SUBSCRIBERS) pipeline.spop(key);
    await pipeline.sadd(key, clientId).expire(key, SUBSCRIPTION_SECONDS).exec();
  }

  async subscribers(accountId: string): Promise<Set<string>> {
    return new Set(await this.redis.smembers(this.key(accountId)));
  }

  private key(accountId: string): string {
    return `${this.config.redisPrefix}:v1:log-subscribers:${accountId}`;
  }
}
