import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import { jobKeys, parsePublishedJobEvent, type AccountMessage, type PublishedJobEvent } from '#libs/jobs';
import { CONFIG } from '../core/tokens.js';

type JobListener = (event: PublishedJobEvent) => void;
type AccountListener = (message: AccountMessage) => void;
type EndedListener = (text: string) => void;

/**
 * One Redis subscription per API replica, fanned out in memory to every event stream and
 * WebSocket of that replica. Events published by any worker reach clients on any replica.
 */
@Injectable()
export class EventFanout implements OnModuleInit, OnApplicationShutdown {
  private readonly subscriber: Redis;
  private readonly byJob = new Map<string, Set<JobListener>>();
  private readonly byAccount = new Map<string, Set<AccountListener>>();
  private readonly jobsByAccount = new Map<string, Set<JobListener>>();
  private readonly endedByJob = new Map<string, Set<EndedListener>>();
  private readonly keys;

  constructor(@Inject(CONFIG) config: Config) {
    this.keys = jobKeys(config.redisPrefix);
    this.subscriber = new Redis(config.redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
    this.subscriber.on('error', () => undefined);
    this.subscriber.on('message', (channel: string, message: string) => {
      // Every replica hears every message; one that follows nothing of a kind skips its parsing.
      if (channel === this.keys.jobEventsChannel) {
        if (this.byJob.size === 0 && this.jobsByAccount.size === 0) return;
        const event = parsePublishedJobEvent(message);
        if (event) {
          for (const l of this.byJob.get(event.jobId) ?? []) l(event);
          for (const l of this.jobsByAccount.get(event.accountId) ?? []) l(event);
        }
      } else if (channel === this.keys.jobEndedChannel) {
        const cut = message.indexOf('\n');
        if (cut > 0) for (const l of this.endedByJob.get(message.slice(0, cut)) ?? []) l(message.slice(cut + 1));
      } else if (channel === this.keys.accountChannel) {
        if (this.byAccount.size === 0) return;
        let parsed: AccountMessage;
        try {
          parsed = JSON.parse(message) as AccountMessage;
        } catch {
          return;
        }
        for (const l of this.byAccount.get(parsed.accountId) ?? []) l(parsed);
      }
    });
  }

  async onModuleInit(): Promise<void> {
    await this.subscriber.connect().catch(() => undefined);
    await this.subscriber.subscribe(this.keys.jobEventsChannel, this.keys.accountChannel, this.keys.jobEndedChannel).catch(() => undefined);
  }

  // Closed only once the HTTP server has drained: requests in flight during a stop still use it.
  onApplicationShutdown(): void {
    this.subscriber.disconnect();
  }

  onJob(jobId: string, listener: JobListener): () => void {
    return add(this.byJob, jobId, listener);
  }

  /** The job as its run ended it (endedJobText), which arrives just before its terminal status event. */
  onJobEnded(jobId: string, listener: EndedListener): () => void {
    return add(this.endedByJob, jobId, listener);
  }

  onAccount(accountId: string, listener: AccountListener): () => void {
    return add(this.byAccount, accountId, listener);
  }

  /** Job events (status, progress, ...) of every job of one account, e.g. for v1 queue status. */
  onAccountJobs(accountId: string, listener: JobListener): () => void {
    return add(this.jobsByAccount, accountId, listener);
  }
}

function add<K, L>(map: Map<K, Set<L>>, key: K, listener: L): () => void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0) map.delete(key);
  };
}
