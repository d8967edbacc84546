import { getHeapStatistics } from 'node:v8';
import underPressure from '@fastify/under-pressure';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import { requestShed } from '#libs/metrics';
import { acceptQueueLength } from './accept-queue.js';
import { routeFlag } from './route-flags.js';

// Load shedding. A replica given more than it can serve otherwise takes every request in and
// serves them all late: its event loop falls seconds behind, it stops accepting connections (the
// kernel's queue overflows and resets them), and request deadlines expire on requests it has not
// even read. Refusing new work with a 503 while it is behind keeps the answers coming, fast, to
// everyone: a refusal costs a header parse and a small body.

/** Served under pressure: probes must tell the truth (a liveness probe failing would restart a busy replica), and operators need their metrics most then. */
const ALWAYS_SERVED = ['/healthz', '/readyz', '/metrics'];

/** under-pressure's names of its thresholds, as the metric's `reason` label. */
const REASON_LABELS: Record<string, string> = {
  eventLoopDelay: 'event_loop_delay',
  eventLoopUtilization: 'event_loop_utilization',
  heapUsedBytes: 'heap_used',
  // The one external check registered: the kernel's accept queue (see accept-queue.ts).
  healthCheck: 'accept_queue',
};

const shedders = new WeakMap<FastifyInstance, LoadShedder>();

/**
 * Registers shedding on the API. A shed request is answered through the global exception filter,
 * so each surface gets its own shape (the envelope on v2 and v1, `{detail, error_type}` on the
 * router), each with Retry-After.
 */
export async function installLoadShedding(app: NestFastifyApplication, config: Config): Promise<void> {
  const shedder = new LoadShedder(config);
  await shedder.install(app);
}

/** For /readyz: the threshold passed while the replica sheds load, or null. */
export function shedReason(fastify: FastifyInstance): string | null {
  return shedders.get(fastify)?.reason() ?? null;
}

class LoadShedder {
  private readonly limits: Config['overload'];
  private readonly basePath: string;
  private readonly alwaysServed: Set<string>;
  private readonly maxHeapUsedBytes: number;
  // One instance for every shed request: building an error (and its stack) per refusal would
  // spend, on the busiest replica, the time shedding is there to save.
  private readonly overloaded: ApiError;
  private fastify!: FastifyInstance;
  // The first samples measure the start (modules loading, routes compiled: the loop is held up for
  // seconds), not load: requests that come at once would be refused for it.
  private warmedUpAt = Number.POSITIVE_INFINITY;
  private inFlight = 0;
  private acceptQueue = 0;
  private acceptQueueLong = false;
  /** The last refusal: readiness stays off for the Retry-After it gave (see reason()). */
  private lastRefusal: { at: number; reason: string } | null = null;

  constructor(config: Config) {
    this.limits = config.overload;
    this.basePath = config.api.basePath;
    this.alwaysServed = new Set(ALWAYS_SERVED.map((path) => `${this.basePath}${path}`));
    this.maxHeapUsedBytes = Math.floor(this.limits.maxHeapUsedFraction * getHeapStatistics().heap_size_limit);
    this.overloaded = new ApiError('service_unavailable', `The service is overloaded; retry in ${this.limits.retryAfterSeconds} s.`, undefined, {
      'retry-after': String(this.limits.retryAfterSeconds),
    });
  }

  async install(app: NestFastifyApplication): Promise<void> {
    // Not awaited: the plugin loads in its turn when the app starts, as the pages before it do
    // (awaiting it would load them all at once here, before anything watching the routes could).
    void app.register(underPressure, {
      maxEventLoopDelay: this.limits.maxEventLoopDelayMs,
      maxEventLoopUtilization: this.limits.maxEventLoopUtilization,
      // The share of the last sample, not since the process started.
      eventLoopUtilizationMode: 'interval',
      maxHeapUsedBytes: this.limits.maxHeapUsedFraction > 0 ? this.maxHeapUsedBytes : 0,
      sampleInterval: this.limits.sampleIntervalMs,
      ...(this.limits.maxAcceptQueue > 0 ? { healthCheck: (instance: FastifyInstance) => this.acceptQueueShort(instance), healthCheckInterval: this.limits.sampleIntervalMs } : {}),
      pressureHandler: (request: FastifyRequest, reply, type) => {
        if (this.exempt(request) || Date.now() < this.warmedUpAt) return undefined;
        // A rejected promise is how under-pressure hands a handler's error to Fastify.
        return Promise.reject(this.refuse(request, reply, REASON_LABELS[type] ?? type));
      },
    });
    this.fastify = app.getHttpAdapter().getInstance() as FastifyInstance;
    shedders.set(this.fastify, this);
    this.fastify.addHook('onReady', (done) => {
      this.warmedUpAt = Date.now() + 2 * this.limits.sampleIntervalMs;
      done();
    });
    if (this.limits.maxRequestsInFlight > 0) this.limitRequestsInFlight();
    this.logChanges();
  }

  /**
   * Whether the connections waiting to be accepted are within the limit (true before the server
   * listens, and where the kernel does not say). Over it takes two samples in a row: a burst of
   * clients connecting at once (a hundred event streams opened together) is taken in within one.
   */
  private async acceptQueueShort(instance: FastifyInstance): Promise<boolean> {
    const address = instance.server.address();
    if (!address || typeof address !== 'object') return true;
    const previous = this.acceptQueue;
    this.acceptQueue = (await acceptQueueLength(address.port).catch(() => null)) ?? 0;
    const max = this.limits.maxAcceptQueue;
    this.acceptQueueLong = this.acceptQueue > max && previous > max;
    return !this.acceptQueueLong;
  }

  /**
   * What makes the replica shed now, or null. A refusal keeps it for the Retry-After the refusal
   * gave: the in-flight limit comes and goes between two requests, and a balancer asking for
   * readiness a moment later should still hear that this replica is turning clients away.
   */
  reason(): string | null {
    if (Date.now() < this.warmedUpAt) return null;
    const max = this.limits.maxRequestsInFlight;
    if (max > 0 && this.inFlight >= max) return `${this.inFlight} requests in flight, the limit`;
    if (!this.fastify.isUnderPressure()) return this.recentRefusal();
    const usage = this.fastify.memoryUsage();
    const l = this.limits;
    if (l.maxEventLoopDelayMs > 0 && usage.eventLoopDelay > l.maxEventLoopDelayMs) {
      // No timer ran in the whole sample: the loop was held up for all of it.
      const delay = Number.isFinite(usage.eventLoopDelay) ? `${Math.round(usage.eventLoopDelay)} ms` : `the whole ${l.sampleIntervalMs} ms sample`;
      return `event loop delay ${delay} over ${l.maxEventLoopDelayMs} ms`;
    }
    if (l.maxHeapUsedFraction > 0 && usage.heapUsed > this.maxHeapUsedBytes) {
      return `heap used ${Math.round(usage.heapUsed / 2 ** 20)} MiB over ${Math.round(this.maxHeapUsedBytes / 2 ** 20)} MiB`;
    }
    if (this.acceptQueueLong) return `${this.acceptQueue} connections waiting to be accepted, over ${l.maxAcceptQueue}`;
    return `event loop utilization ${usage.eventLoopUtilized.toFixed(3)} over ${l.maxEventLoopUtilization}`;
  }

  private recentRefusal(): string | null {
    if (!this.lastRefusal) return null;
    const ago = Date.now() - this.lastRefusal.at;
    return ago < this.limits.retryAfterSeconds * 1000 ? `refused a request ${ago} ms ago (${this.lastRefusal.reason})` : null;
  }

  private exempt(request: FastifyRequest): boolean {
    return this.alwaysServed.has(request.routeOptions.url ?? '');
  }

  /** Counts a refusal and returns the error that answers it. */
  private refuse(request: FastifyRequest, reply: FastifyReply, reason: string): ApiError {
    requestShed(reason);
    this.lastRefusal = { at: Date.now(), reason };
    return this.overloaded;
  }

  /**
   * Requests that wait by design, for minutes: an event stream, a submission with `Prefer: wait`,
   * a router call (as long as its partner model takes). They hold no CPU while they wait, so they
   * do not count against the requests in flight.
   */
  private waitsByDesign(request: FastifyRequest): boolean {
    if (request.routeOptions.url?.endsWith('/events')) return true;
    if (/\bwait\b/i.test(String(request.headers.prefer ?? ''))) return true;
    return routeFlag(request, 'waitsByDesign') === true;
  }

  /**
   * The event loop's figures are sampled, and a starved loop samples late: between two samples a
   * busy replica would take in, all at once, every request that arrived meanwhile, and each of
   * them waits for all the others. A bound on the requests being served refuses the surplus at once.
   */
  private limitRequestsInFlight(): void {
    const max = this.limits.maxRequestsInFlight;
    this.fastify.addHook('onRequest', (request, reply, done) => {
      if (this.exempt(request) || this.waitsByDesign(request)) return done();
      if (this.inFlight >= max) return done(this.refuse(request, reply, 'requests_in_flight'));
      this.inFlight++;
      // Answered, or the client gone: either way the request is no longer being served.
      reply.raw.once('close', () => this.inFlight--);
      done();
    });
  }

  /** One log line when shedding starts and one when it stops, rather than one per refused request. */
  private logChanges(): void {
    let shedding: string | null = null;
    const timer = setInterval(() => {
      const reason = this.reason();
      if ((reason === null) === (shedding === null)) return;
      if (reason) this.fastify.log.warn({ reason }, 'overloaded: shedding new requests with 503');
      else this.fastify.log.warn({ was: shedding }, 'load back under the thresholds: serving every request again');
      shedding = reason;
    }, this.limits.sampleIntervalMs);
    timer.unref();
    this.fastify.addHook('onClose', (_instance, done) => {
      clearInterval(timer);
      done();
    });
  }
}
