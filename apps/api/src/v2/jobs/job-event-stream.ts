import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { isTerminal, LastEventIdSchema } from '#libs/contracts';
import type { Account } from '#libs/db';
import { compareStreamIds, eventIdOf, JobEventLog, JobStore, parseEventId, QueuePositions, type JobSystem, type StoredJobEvent } from '#libs/jobs';
import { Draining } from '../../core/draining.js';
import { CONFIG } from '../../core/tokens.js';
import { EventFanout } from '../../jobs/event-fanout.js';
import { STATUS_READS } from '../../jobs/job-system.providers.js';
import { JobViews, type JobScope } from '../../jobs/job-views.service.js';
import { AccountLimits } from '../../limits/index.js';
import { parseV2Input } from '../parse-input.js';
import { SseSink } from './sse-sink.js';

/**
 * Server-Sent Events for one job. Authentication, ownership and the stream limit are settled
 * before the first byte. Then: the catch-up (everything after `Last-Event-ID`, or a snapshot of
 * status, progress and preview), then live events from any worker, deduplicated by stream id so
 * nothing is sent twice or lost in between. The stream ends after the terminal status.
 *
 * Every event has its own id (eventIdOf): a logged event its log id, one the stream makes itself
 * (a queue position, a status or progress read from the row) an id after the last logged event it
 * sent. A client resuming from a logged event's id gets the log after it; from one the stream
 * made, the snapshot again (status, progress and preview as of then) and the log after it.
 */
@Injectable()
export class JobEventStream {
  constructor(
    private readonly jobs: JobStore,
    @Inject(CONFIG) private readonly config: Config,
    private readonly events: JobEventLog,
    @Inject(STATUS_READS) private readonly statusReads: JobSystem['statusReads'],
    private readonly positions: QueuePositions,
    private readonly fanout: EventFanout,
    private readonly views: JobViews,
    private readonly limits: AccountLimits,
    /** When this replica begins to stop, the stream ends and its client resumes elsewhere. */
    private readonly draining: Draining,
  ) {}

  async stream(account: Account, scope: JobScope, jobId: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { jobs, config, events, statusReads, fanout, views, limits, draining } = this;
    const queuePositions = this.positions;
    const raw = reply.raw;
    const { createdAt } = await views.find(scope, jobId);
    const lastEventId = parseV2Input(LastEventIdSchema, request.headers['last-event-id']);
    const resumeFrom = lastEventId === undefined ? null : parseEventId(lastEventId);
    // A client may leave while the lookups wait on the database and Redis. Its connection's 'close'
    // has then fired before the stream listens for it, so it would never be seen: the slot would be
    // held (and refreshed by the keepalive) until the job ends. A connection already gone gets no
    // slot, and a slot taken while it went is given back at once.
    if (raw.destroyed) return;
    const slot = await limits.openStream(account, randomUUID());
    if (raw.destroyed) {
      void slot.close().catch(() => undefined);
      return;
    }
    // Nothing below waits before `raw.on('close', finish)`: any later close finishes the stream.

    reply.hijack();
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': request.id,
    });
    raw.flushHeaders?.();

    // The last logged event sent (or resumed from), and how many events the stream made since.
    let lastSent = resumeFrom?.after ?? '0-0';
    let derived = resumeFrom?.derived ?? 0;
    const nextDerivedId = () => eventIdOf(lastSent, ++derived);
    let ended = false;
    let live = false;
    const early: StoredJobEvent[] = [];
    let chain: Promise<void> = Promise.resolve();
    let lastPosition: number | null | undefined;
    // Followed from the status events this stream relays, so only a waiting job's stream polls.
    let knownStatus: string | null = null;

    const sink = new SseSink(raw);
    // A client too far behind is cut off (the close event then finishes the stream).
    const write = (text: string, expendable = false) => {
      if (!ended) sink.write(text, expendable);
    };
    const finish = () => {
      if (ended) return;
      ended = true;
      cleanup();
      raw.end();
    };
    // The log holds status events without a position, which moves with the queue: a queued one is
    // sent with the position as of now, never without one. A job that stopped waiting meanwhile has
    // none before it (0; its next status follows). A count that keeps failing ends the stream, and
    // the client's reconnection asks again.
    const positionNow = async (): Promise<number> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return (await queuePositions.one(jobId, createdAt)) ?? 0;
        } catch (err) {
          if (attempt >= 3) throw err;
          await new Promise((r) => setTimeout(r, 100 * attempt));
        }
      }
    };
    const statusView = async (data: string, status: { status?: string }) => {
      if (status.status !== 'queued') return data;
      lastPosition = await positionNow();
      return JSON.stringify({ ...status, queue_position: lastPosition });
    };
    const send = async (id: string, event: string, data: string) => {
      if (event !== 'status') {
        const body = event === 'output' ? JSON.stringify(await views.outputEventView(JSON.parse(data) as Record<string, unknown>, request)) : data;
        write(`id: ${id}\nevent: ${event}\ndata: ${body}\n\n`, event === 'preview');
        return;
      }
      const status = JSON.parse(data) as { status?: string };
      write(`id: ${id}\nevent: status\ndata: ${await statusView(data, status)}\n\n`);
      knownStatus = status.status ?? null;
      if (isTerminal(knownStatus ?? '')) finish();
    };
    // A step that fails (the database behind an output's links, say) ends the stream: an event may
    // be half sent, and the client's reconnection with Last-Event-ID brings everything after the
    // last one it got. Nothing rejects past here: an unhandled rejection would stop the process.
    const fail = (err: unknown) => {
      if (!ended) request.log.warn({ err }, 'event stream failed');
      finish();
    };
    const enqueue = (step: () => Promise<void>) => {
      chain = chain.then(step).catch(fail);
      return chain;
    };
    const deliver = (e: StoredJobEvent) =>
      enqueue(async () => {
        if (ended || compareStreamIds(e.id, lastSent) <= 0) return;
        lastSent = e.id;
        derived = 0;
        await send(eventIdOf(e.id), e.event, e.data);
      });

    const unsubscribe = fanout.onJob(jobId, (e) => {
      if (live) void deliver(e);
      else early.push(e);
    });
    const keepalive = setInterval(() => {
      write(': keepalive\n\n');
      void slot.refresh().catch(() => undefined);
    }, config.jobs.sseKeepaliveMs);
    // Queue positions are derived, not logged: a waiting job's stream reports each change. A job
    // past the queue is looked at only now and then, in case its terminal event never made it into
    // the log (Redis lost it): the stream must still end.
    // Whatever the log holds that live delivery has not brought yet, then the ending itself.
    // The ending already sent (a client back after the end) goes again under its own id; one the log
    // lost (Redis did) is made from the row, with an id of the stream's.
    const sendEnding = async (status: string) => {
      const missed = await events.since(jobId, lastSent).catch(() => null);
      if (!missed) return;
      for (const e of missed) {
        if (ended) return;
        lastSent = e.id;
        derived = 0;
        await send(eventIdOf(e.id), e.event, e.data);
      }
      if (ended) return;
      const logged = await events.latest(jobId, 'status').catch(() => null);
      const same = logged && (JSON.parse(logged.data) as { status?: string }).status === status;
      await send(same ? eventIdOf(logged.id) : nextDerivedId(), 'status', JSON.stringify({ status, queue_position: null }));
    };
    let ticks = 0;
    const positions = setInterval(() => {
      const waiting = knownStatus === null || knownStatus === 'queued';
      if (!waiting && ++ticks % 10 !== 0) return;
      // A read that fails is tried again at the next tick; only a failed send ends the stream.
      void enqueue(async () => {
        const job = await statusReads.read(jobId).catch(() => undefined);
        if (job === undefined || ended) return;
        // The job is gone (purged after its retention, or with its account): nothing more will come
        // and the slot would be held for ever. The client's reconnection gets 404.
        if (job === null) return finish();
        if (isTerminal(job.status) && !waiting) return sendEnding(job.status);
        knownStatus = job.status;
        if (job.status !== 'queued') return;
        const position = await queuePositions.one(jobId, job.createdAt).catch(() => undefined);
        // null: no longer waiting (its next status is on its way).
        if (position !== undefined && position !== null && position !== lastPosition) {
          lastPosition = position;
          write(`id: ${nextDerivedId()}\nevent: status\ndata: ${JSON.stringify({ status: 'queued', queue_position: position })}\n\n`);
        }
      });
    }, 1000);
    let undrain: () => void = () => undefined;
    function cleanup() {
      undrain();
      clearInterval(keepalive);
      clearInterval(positions);
      unsubscribe();
      void slot.close().catch(() => undefined);
    }
    raw.on('close', finish);
    // Closing the connection too sends the client's reconnection (with Last-Event-ID) elsewhere.
    undrain = draining.onDraining(() => {
      finish();
      request.raw.socket?.end();
    });

    try {
      // The row is read before the log: the log is then at least as new, and its own latest status
      // wins. (Read the other way round, a job ending in between showed as ended without its final
      // progress.) The row only speaks when the log has no status, e.g. after Redis lost it.
      // An id the log never issued (one from the future, or from a log since expired) resumes
      // nothing: the client gets the snapshot instead of waiting on events that will never come.
      const resume = resumeFrom && (await events.issued(jobId, resumeFrom.after)) ? resumeFrom : null;
      if (resume && resume.derived === 0) {
        const logged = await events.since(jobId, resume.after);
        for (const e of logged) await deliver(e);
        // A client back after its stream ended (an EventSource reconnects by itself) is told the
        // ending again at once, not after the row's next look.
        void enqueue(async () => {
          const row = await statusReads.read(jobId);
          if (row && !ended && isTerminal(row.status)) await sendEnding(row.status);
        });
      } else {
        // A fresh client, or one back from an event the stream made: a snapshot as of the logged
        // event it follows, then the log after that event.
        const job = await jobs.getOrThrow(jobId);
        const all = await events.since(jobId);
        const cut = resume ? all.findIndex((e) => compareStreamIds(e.id, resume.after) > 0) : -1;
        const logged = cut < 0 ? all : all.slice(0, cut);
        const later = cut < 0 ? [] : all.slice(cut);
        const latest = (name: string) => [...logged].reverse().find((e) => e.event === name);
        const loggedStatus = latest('status');
        const current = loggedStatus ? ((JSON.parse(loggedStatus.data) as { status?: string }).status ?? job.status) : job.status;
        const status = { id: loggedStatus ? eventIdOf(loggedStatus.id) : null, data: JSON.stringify({ status: current, queue_position: null }) };
        const progress = latest('progress');
        const preview = latest('preview');
        // Logged events keep their own ids, in the order they were logged; the rest are the stream's.
        const state = [
          ...(progress ? [{ id: eventIdOf(progress.id), event: 'progress', data: progress.data, at: progress.id }] : job.progress ? [{ id: null, event: 'progress', data: JSON.stringify(job.progress), at: null }] : []),
          ...(preview ? [{ id: eventIdOf(preview.id), event: 'preview', data: preview.data, at: preview.id }] : []),
        ].sort((a, b) => (a.at && b.at ? compareStreamIds(a.at, b.at) : 0));
        if (!resume) {
          lastSent = logged.at(-1)?.id ?? '0-0';
          derived = 0;
        }
        // Back from an event of its own: what it had is re-sent under new ids, after the one it had.
        const idOf = (id: string | null) => (resume || id === null ? nextDerivedId() : id);
        void enqueue(async () => {
          const terminal = isTerminal(current);
          if (!terminal) await send(idOf(status.id), 'status', status.data);
          for (const e of state) await send(idOf(e.id), e.event, e.data);
          if (terminal) await send(idOf(status.id), 'status', status.data);
        });
        for (const e of later) void deliver(e);
      }
      await chain;
      live = true;
      for (const e of early) void deliver(e);
      await chain;
    } catch (err) {
      request.log.warn({ err }, 'event stream failed');
      finish();
    }
  }
}
