import type { Logger } from 'pino';
import { webhookAttemptObserved, webhookDeliveryEnded } from '#libs/metrics';
import type { OutboundPolicy } from '#libs/outbound';
import { isRetryable, nextDelayMs, openEndpointSecret, postWebhook, signedHeaders, type AttemptOutcome } from '#libs/webhooks';
import type { AttemptRecord, ClaimedDelivery, DeliveryStore } from './delivery-store.js';
import type { Payloads } from './payload.js';

export interface DelivererOptions {
  signingSecret: string;
  /** The service's outbound rules (loopback allowed or not, https only or not). */
  policy: OutboundPolicy;
  timeoutMs: number;
  maxResponseBytes: number;
  retryScale: number;
  concurrency: number;
}

// What of a receiver's answer a failed delivery's record keeps.
const EXCERPT_CHARS = 200;
// Retries due sooner than this get a timer of their own; later ones are left to the poll.
const RETRY_TIMER_MAX_MS = 60_000;

/**
 * Claims due deliveries and makes their attempts, up to `concurrency` at once. It works whenever
 * woken (a new event's NOTIFY, the poll, a retry coming due that this process scheduled, a
 * delivery finishing while more wait) and claims only as many as it has room for, so a backlog
 * is shared by all replicas rather than leased by the first.
 */
export class Deliverer {
  private readonly inFlight = new Set<Promise<void>>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private passing = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly store: DeliveryStore,
    private readonly payloads: Payloads,
    private readonly options: DelivererOptions,
    private readonly log: Logger,
  ) {}

  /**
   * Long enough for an attempt (bounded by the timeout) with its rendering and its record; a
   * process that dies holding deliveries frees them when it lapses.
   */
  private get leaseMs(): number {
    return 2 * this.options.timeoutMs + 5_000;
  }

  /** Looks for due deliveries now (or right after the pass under way). */
  wake(): void {
    if (this.stopped) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    void this.pass();
  }

  private async pass(): Promise<void> {
    this.passing = true;
    try {
      do {
        this.again = false;
        const room = this.options.concurrency - this.inFlight.size;
        if (room <= 0) break; // a delivery that finishes wakes the next pass
        const claimed = await this.store.claim(room, this.leaseMs);
        for (const delivery of claimed) this.start(delivery);
        if (claimed.length === room) this.again = true;
      } while (this.again && !this.stopped);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'could not claim webhook deliveries');
    } finally {
      this.passing = false;
    }
  }

  private start(delivery: ClaimedDelivery): void {
    const run = this.deliver(delivery)
      .catch((err: Error) => this.log.warn({ err: err.message, delivery_id: delivery.id }, 'webhook delivery not recorded; it is retried once its lease lapses'))
      .finally(() => {
        this.inFlight.delete(run);
        this.wake();
      });
    this.inFlight.add(run);
  }

  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    const at = new Date();
    if (!delivery.enabled) {
      await this.finish(delivery, { status: 'failed', attempted: false, nextAttemptAt: null, at, responseCode: null, latencyMs: null, error: 'The endpoint is disabled.', gone: null });
      return;
    }
    const body = await this.payloads.body(delivery);
    if (body === null) {
      await this.finish(delivery, { status: 'failed', attempted: false, nextAttemptAt: null, at, responseCode: null, latencyMs: null, error: 'The job no longer exists.', gone: null });
      return;
    }
    const secrets = this.secrets(delivery, at);
    if (!secrets) {
      await this.finish(delivery, { status: 'failed', attempted: false, nextAttemptAt: null, at, responseCode: null, latencyMs: null, error: 'The endpoint\'s secret cannot be read (SIGNING_SECRET changed); rotate it.', gone: null });
      return;
    }
    const headers = signedHeaders(secrets, delivery.id, at, body);
    const outcome = await postWebhook(delivery.url, headers, body, { policy: this.options.policy, timeoutMs: this.options.timeoutMs, maxResponseBytes: this.options.maxResponseBytes });
    await this.finish(delivery, this.recordOf(delivery, outcome, at));
  }

  /**
   * The current secret, and the one it replaced while that still signs (a rotation's overlap);
   * null when they cannot be opened (sealed under another SIGNING_SECRET): no attempt would verify.
   */
  private secrets(delivery: ClaimedDelivery, at: Date): string[] | null {
    try {
      const current = openEndpointSecret(this.options.signingSecret, delivery.secretSealed);
      const previous = delivery.previousSecretSealed && delivery.previousSecretExpiresAt && delivery.previousSecretExpiresAt > at ? openEndpointSecret(this.options.signingSecret, delivery.previousSecretSealed) : null;
      return previous ? [current, previous] : [current];
    } catch {
      return null;
    }
  }

  private recordOf(delivery: ClaimedDelivery, outcome: AttemptOutcome, at: Date): AttemptRecord {
    const { result, latencyMs } = outcome;
    const responseCode = 'status' in result ? result.status : null;
    const base = { attempted: true, at, responseCode, latencyMs, gone: null };
    webhookAttemptObserved(result.kind === 'delivered' ? 'delivered' : 'status' in result ? 'http_error' : result.kind);
    if (result.kind === 'delivered') return { ...base, status: 'succeeded', nextAttemptAt: null, error: null };
    const error = this.errorText(outcome);
    const delay = isRetryable(result) ? nextDelayMs(delivery.attempts + 1, this.options.retryScale, result.kind === 'retryable_status' ? result.retryAfterMs : null) : null;
    if (delay !== null) return { ...base, status: 'pending', nextAttemptAt: new Date(at.getTime() + delay), error };
    const gone = result.kind === 'refused_status' && result.status === 410 ? `The endpoint answered 410 Gone at ${at.toISOString()}.` : null;
    return { ...base, status: 'failed', nextAttemptAt: null, error, gone };
  }

  private errorText({ result, excerpt }: AttemptOutcome): string {
    const text = excerpt.replace(/\s+/g, ' ').trim().slice(0, EXCERPT_CHARS);
    switch (result.kind) {
      case 'retryable_status':
      case 'refused_status':
        return `HTTP ${result.status}${text ? `: ${text}` : ''}`;
      case 'timeout':
        return `No answer within ${this.options.timeoutMs} ms.`;
      case 'connection_error':
        return `Connection failed: ${result.message}.`;
      case 'blocked_address':
        return `Refused: ${result.message}; webhooks reach public addresses only.`;
      default:
        return '';
    }
  }

  private async finish(delivery: ClaimedDelivery, record: AttemptRecord): Promise<void> {
    const { recorded, status, disabled } = await this.store.record(delivery, record);
    if (!recorded) {
      this.log.warn({ delivery_id: delivery.id }, 'webhook delivery lease lapsed before its attempt was recorded');
      return;
    }
    if (status === 'succeeded' || status === 'failed') webhookDeliveryEnded(status);
    if (disabled) this.log.warn({ endpoint_id: delivery.endpointId, reason: disabled }, 'webhook endpoint disabled');
    // A retry due soon is woken for on time by this process; any other is found by the poll.
    if (status === 'pending' && record.nextAttemptAt && record.nextAttemptAt.getTime() - Date.now() < RETRY_TIMER_MAX_MS) {
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        this.wake();
      }, Math.max(0, record.nextAttemptAt.getTime() - Date.now()));
      this.retryTimers.add(timer);
    }
  }

  /** Stops claiming and lets the attempts under way finish (each is bounded by the timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.retryTimers) clearTimeout(timer);
    await Promise.allSettled([...this.inFlight]);
  }
}
