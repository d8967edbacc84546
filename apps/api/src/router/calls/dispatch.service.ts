import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import type { Account } from '#libs/db';
import { componentLogger } from '#libs/logging';
import { Draining } from '../../core/draining.js';
import { CONFIG } from '../../core/tokens.js';
import { errorResult, ProviderGateway, type GenerationResult } from '../adapters/index.js';
import type { CatalogModel } from '../catalog/catalog.service.js';
import { RouterCreditsService, type HeldCharge } from '../credits/router-credits.service.js';
import { RouterError } from '../errors.js';
import { LimitsService, type Slot } from '../limits/limits.service.js';
import { DEADLINE, callerGone, providerBound, raceDeadline, type CallInput, type CallReply, type Generation, type KeyClaim } from './call.js';
import { SettlementService } from './settlement.service.js';
import { UsageService, type KeyedRow } from './usage.service.js';

// Dispatch: a new generation at the provider (credits, slot, the provider exchange), the caller
// held up to its deadline, and the registry of generations this process runs or collects, which
// keyed retries join instead of dispatching another.

/** Another call claimed the key between the look and the claim: the caller joins that one. */
export const CLAIM_LOST = Symbol('claimLost');

// A generation's promise until its dispatch is chained on: one shared placeholder, not a result per call.
const NOT_STARTED: Promise<GenerationResult> = new Promise(() => undefined);
const LAST_LOOK_MS = 5_000;
// How long after the provider's deadline its ending (provider_timeout, stored if keyed) may take.
const ENDING_SLACK_MS = 2_000;

@Injectable()
export class DispatchService {
  private readonly logger = componentLogger('RouterDispatch');
  private readonly generations = new Map<string, Generation>();

  constructor(
    private readonly providers: ProviderGateway,
    private readonly limits: LimitsService,
    private readonly usage: UsageService,
    private readonly settlement: SettlementService,
    private readonly credits: RouterCreditsService,
    @Inject(CONFIG) private readonly config: Config,
    private readonly stopping: Draining,
  ) {}

  /** A new generation: key, slot, dispatch, wait up to the deadline; the generation may outlive the wait. */
  async fresh(input: CallInput, model: CatalogModel, keyed: KeyClaim | null): Promise<CallReply | typeof CLAIM_LOST> {
    this.checkCredits(input.account, model);
    if (!this.usage.recording()) throw new RouterError('service_unavailable', 'The router cannot record calls right now; retry with backoff.', { 'retry-after': '1' });
    if (input.fate.gone()) throw callerGone();
    // The price is held against the balance from here until the generation's charge settles it:
    // calls in flight together cannot spend more than the balance holds.
    const held = this.credits.hold(input.account.id, model.priceCents);
    let generation: Generation;
    try {
      // The key is claimed before a slot is taken: a duplicate that loses the claim joins the winner
      // and takes nothing from the workspace's limits (no slot, no count in the window).
      if (keyed) {
        const claimed = await this.usage.insertKeyed({ id: input.callId, accountId: input.account.id, modelId: model.id, key: keyed.key, requestHash: keyed.requestHash, costCents: model.priceCents });
        if (!claimed) {
          held(false);
          return CLAIM_LOST;
        }
      }
      let slot: Slot;
      try {
        slot = await this.takeSlot(input, model);
      } catch (err) {
        if (keyed) await this.withdrawClaim(input.callId);
        throw err;
      }
      // A keyed call's row exists already; an unkeyed one is put on record as it is dispatched.
      if (!keyed) this.usage.recordStart({ id: input.callId, accountId: input.account.id, modelId: model.id, costCents: model.priceCents, startedAt: input.startedAt });
      generation = this.start(input, model, slot, keyed !== null, held);
    } catch (err) {
      held(false);
      throw err;
    }
    const ended = await raceDeadline(generation.promise, this.waitUntil(input, model, Date.now() + model.timeoutMs), this.stopping);
    const deadlineHit = ended === DEADLINE;
    const reply: CallReply = deadlineHit ? this.deadlineReply(model, keyed !== null, generation.handle) : { result: ended, headers: creditsUsed(ended, model) };
    // Tracked: a stop waits for generations whose callers have their answer already.
    this.usage.track(this.settlement.recordEnding(input, model, generation, deadlineHit, keyed !== null, held), `usage record ${input.callId}`);
    return reply;
  }

  /** The generation of a keyed call this process runs or collects, to wait on. */
  running(callId: string): Generation | undefined {
    return this.generations.get(callId);
  }

  deadlineAt(input: CallInput): number {
    return input.startedAt + this.config.router.deadlineMs;
  }

  deadlineReply(model: CatalogModel, keyed: boolean, handle: string | null): CallReply {
    const collectable = keyed && handle !== null && this.providers.canCollect(model);
    const bound = this.stopping.graceOver ? 'because this replica is shutting down' : `at its ${this.config.router.deadlineMs} ms deadline`;
    const detail = `The router stopped waiting ${bound}; nothing was rejected.${keyed ? ' Retry with the same Idempotency-Key to collect the generation instead of starting another.' : ''}`;
    return {
      result: errorResult('deadline_exceeded', detail),
      headers: collectable ? { 'retry-after': String(this.retryAfterSeconds(model)) } : {},
    };
  }

  private checkCredits(account: Account, model: CatalogModel): void {
    const balance = this.credits.available(account);
    if (balance < BigInt(model.priceCents) || (model.priceCents > 0 && balance <= 0n)) {
      throw new RouterError('insufficient_credits', `The workspace lacks the credits to run ${model.id} (it costs ${model.priceCents}).`);
    }
  }

  /**
   * When a new generation's caller is answered at the latest. Its deadline, unless the provider's
   * own (`providerEndsAt`) comes before a retry could: then "retry to collect it" would send the
   * retry after a generation already ended as provider_timeout, and the retry would dispatch
   * another. The caller waits for that ending instead.
   */
  private waitUntil(input: CallInput, model: CatalogModel, providerEndsAt: number): number {
    const deadlineAt = this.deadlineAt(input);
    if (deadlineAt + this.retryAfterSeconds(model) * 1000 <= providerEndsAt) return deadlineAt;
    return Math.max(deadlineAt, providerEndsAt + ENDING_SLACK_MS);
  }

  private retryAfterSeconds(model: CatalogModel): number {
    return Math.max(1, Math.ceil(model.pollIntervalMs / 1000));
  }

  /** The slot the dispatch holds; a limit may refuse it, and a caller that left meanwhile gets none. */
  private async takeSlot(input: CallInput, model: CatalogModel): Promise<Slot> {
    const slot = await this.limits.acquire(input.account, model.priceCents);
    if (input.fate.gone()) {
      this.limits.release(slot);
      throw callerGone();
    }
    return slot;
  }

  /**
   * Lets the key of a call that was never dispatched go, so that its duplicates and retries
   * dispatch; the call is then recorded as any refused call is.
   */
  private async withdrawClaim(callId: string): Promise<void> {
    try {
      await this.usage.withdrawKeyed(callId);
    } catch (err) {
      // The row stays running without a handle: the key is freed once it is presumed lost.
      this.logger.error(`key claim of ${callId} not withdrawn: ${(err as Error).message}`);
    }
  }

  /** Dispatches at the provider; the slot is held until the generation ends, whoever waits for it. */
  private start(input: CallInput, model: CatalogModel, slot: Slot, keyed: boolean, held: HeldCharge): Generation {
    const generation: Generation = { handle: null, promise: NOT_STARTED };
    const bound = providerBound(model.timeoutMs, this.stopping);
    generation.promise = this.providers
      .dispatch(model, { raw: input.rawBody!, parsed: input.body }, {
        signal: bound.signal,
        media: { accountId: input.account.id, callId: input.callId, origin: input.origin },
        onHandle: (handle) => {
          generation.handle = handle;
          if (keyed) this.usage.track(this.usage.setHandle(input.callId, handle), `handle of ${input.callId}`);
        },
      })
      .catch((err: Error) => {
        this.logger.error(`dispatch of ${input.callId} failed: ${err.stack ?? err.message}`);
        return errorResult('internal_error', 'The router failed while calling the provider.');
      })
      .finally(() => {
        bound.release();
        this.limits.release(slot);
      });
    if (keyed) {
      this.generations.set(input.callId, generation);
      const dispatchedResult = generation.promise;
      // The key's final state is written before anyone (the caller, a joined retry) sees the result,
      // so a retry that follows a failure always finds the key free and dispatches again. While the
      // database refuses the write, the generation stays here for retries to join, not dispatch anew.
      generation.promise = dispatchedResult.then(async (result) => {
        if (this.settlement.abandoned(result)) {
          // Not charged here: whoever collects it later charges it.
          held(false);
          this.generations.delete(input.callId);
          return result;
        }
        await this.settlement.storeCharged(input.callId, input.account.id, model.priceCents, model, result, held);
        this.generations.delete(input.callId);
        return result;
      });
      this.usage.track(generation.promise, `result of ${input.callId}`);
    }
    return generation;
  }

  /**
   * Collects a keyed generation by its provider handle, without dispatching another; one collector
   * per process per generation. Undefined when the model's provider cannot be asked about it.
   */
  collect(model: CatalogModel, row: KeyedRow, origin: () => string): Generation | undefined {
    if (!this.providers.canCollect(model) || !row.providerHandle) return undefined;
    const existing = this.generations.get(row.id);
    if (existing) return existing;
    // Past the provider's deadline too (its replica died before storing how it ended), a last look:
    // the generation may have finished meanwhile.
    const remaining = Math.max(LAST_LOOK_MS, row.createdAt.getTime() + model.timeoutMs - Date.now());
    const handle = row.providerHandle;
    const bound = providerBound(remaining, this.stopping);
    const generation: Generation = {
      handle,
      promise: this.providers
        .collect(model, handle, { signal: bound.signal, media: { accountId: row.accountId, callId: row.id, origin } })
        .catch((err: Error) => {
          this.logger.error(`collecting ${row.id} failed: ${err.stack ?? err.message}`);
          return errorResult('internal_error', 'The router failed while collecting the generation.');
        })
        .then(async (result) => {
          if (this.settlement.abandoned(result)) return result;
          const first = await this.settlement.storeCharged(row.id, row.accountId, row.costCents, model, result, null);
          if (first !== false) return result; // stored by this collector, or by none
          // Another collector stored it first: everyone returns that one.
          const stored = await this.usage.find(row.id);
          if (stored?.responseBody && stored.httpStatus !== null && stored.resultBucket) {
            return { bucket: stored.resultBucket as GenerationResult['bucket'], status: stored.httpStatus, contentType: stored.responseType ?? 'application/json', body: Buffer.from(stored.responseBody) };
          }
          return result;
        })
        .finally(() => {
          bound.release();
          this.generations.delete(row.id);
        }),
    };
    this.generations.set(row.id, generation);
    // Tracked like a dispatched one: a stop waits until its final state is stored.
    this.usage.track(generation.promise, `result of ${row.id}`);
    return generation;
  }
}

/** A successful call says what it cost (1 credit = 1 US cent); a replay does not (it costs nothing). */
function creditsUsed(result: GenerationResult, model: CatalogModel): Record<string, string> {
  return result.bucket === 'success' ? { 'x-service-credits-used': String(model.priceCents) } : {};
}
