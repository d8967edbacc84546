import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Config } from '#libs/config';
import type { Account } from '#libs/db';
import { Draining } from '../../core/draining.js';
import { CONFIG } from '../../core/tokens.js';
import { toErrorShape } from '../../http/error-body.js';
import { adapterFor, errorResult, validationResult, type GenerationResult } from '../adapters/index.js';
import { CatalogService, type CatalogModel } from '../catalog/catalog.service.js';
import { isEntitled, isModelSegment, isProviderSegment } from '../catalog/model-id.js';
import { closestIds } from '../catalog/suggestions.js';
import { BUCKET_STATUS, RouterError, RouterValidationError, type RouterBucket } from '../errors.js';
import { LimitsService, type Slot } from '../limits/limits.service.js';
import { RouterAuthService, type HeldCharge } from '../router-auth.js';
import { LOST_CALL_GRACE_MS, UsageService, type KeyedRow } from './usage.service.js';

/** What the controller knows about the caller's connection. */
export interface CallerFate {
  /** Resolves once the response left (true) or the caller went away first (false). */
  settled: Promise<boolean>;
  /** Whether the caller has gone already: nothing can reach it any more. */
  gone(): boolean;
}

export interface CallInput {
  callId: string;
  account: Account;
  provider: string;
  model: string;
  rawBody: Buffer | undefined;
  body: unknown;
  /** Why the body could not be read as JSON, when it could not. */
  bodyError: string | undefined;
  idempotencyKey: string | undefined;
  fate: CallerFate;
  /** Epoch ms the request arrived. */
  startedAt: number;
}

export interface CallReply {
  result: GenerationResult;
  headers: Record<string, string>;
}

/** A generation this process is running or collecting: joiners wait on the same promise. */
interface Generation {
  promise: Promise<GenerationResult>;
  handle: string | null;
}

const DEADLINE = Symbol('deadline');
// A generation's promise until its dispatch is chained on: one shared placeholder, not a result per call.
const NOT_STARTED: Promise<GenerationResult> = new Promise(() => undefined);
const LAST_LOOK_MS = 5_000;
// How long after the provider's deadline its ending (provider_timeout, stored if keyed) may take.
const ENDING_SLACK_MS = 2_000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
const KEY_LIFETIME_MS = 24 * 3600 * 1000;
// Results a later retry gets back as they were; other endings free the key so a later retry
// dispatches anew. A duplicate that arrived while the generation ran gets its result, whatever it is.
const REPLAYABLE = new Set(['success', 'content_policy_violation', 'invalid_input']);

@Injectable()
export class CallsService {
  private readonly logger = new Logger('RouterCalls');
  private readonly generations = new Map<string, Generation>();

  constructor(
    private readonly catalog: CatalogService,
    private readonly limits: LimitsService,
    private readonly usage: UsageService,
    private readonly auth: RouterAuthService,
    @Inject(CONFIG) private readonly config: Config,
    private readonly stopping: Draining,
  ) {}

  /** Runs one call to its end; never throws, every ending is a reply and a usage record. */
  async run(input: CallInput): Promise<CallReply> {
    const modelId = `${input.provider}/${input.model}`.slice(0, 300);
    try {
      const model = await this.resolve(input.account, input.provider, input.model);
      if (input.bodyError !== undefined) throw new RouterError('invalid_input', input.bodyError);
      if (input.rawBody === undefined || input.body === undefined) {
        throw new RouterError('invalid_input', "The request body must be the model's JSON input (Content-Type: application/json).");
      }
      const problems = model.schema.validate(input.body);
      if (problems.length > 0) throw new RouterValidationError('invalid_input', problems);
      const key = input.idempotencyKey;
      if (key !== undefined) return await this.keyed(input, model, key, 0);
      return await this.fresh(input, model, null);
    } catch (err) {
      const reply = this.failureReply(err);
      this.usage.recordUndispatched({ id: input.callId, accountId: input.account.id, modelId, outcome: reply.result.bucket, httpStatus: reply.result.status, startedAt: input.startedAt });
      return reply;
    }
  }

  /** The model the caller may run, or the 404/403 that says why not. */
  async resolve(account: Account, provider: string, model: string): Promise<CatalogModel> {
    const id = `${provider}/${model}`;
    const found = isProviderSegment(provider) && isModelSegment(model) ? await this.catalog.get(id) : undefined;
    if (!found) {
      const visible = this.catalog.ids().filter((candidate) => isEntitled(account.routerEntitlements, candidate));
      const suggestions = closestIds(id, visible);
      const shown = id.length > 200 ? `${id.slice(0, 200)}…` : id;
      throw new RouterError('model_not_found', `No runnable model is named '${shown}'.${suggestions.length ? ` Did you mean: ${suggestions.join(', ')}?` : ''}`);
    }
    if (!isEntitled(account.routerEntitlements, found.id)) throw new RouterError('forbidden', `This workspace is not entitled to ${found.id}.`);
    return found;
  }

  private failureReply(err: unknown): CallReply {
    if (err instanceof RouterValidationError) return { result: validationResult(err.bucket, err.entries), headers: {} };
    if (err instanceof RouterError) return { result: { ...errorResult(err.bucket, err.detail), status: err.status }, headers: err.headers };
    if (toErrorShape(err).status === 503) {
      this.logger.warn(`router call failed on a dependency: ${(err as Error)?.message ?? String(err)}`);
      return { result: errorResult('service_unavailable', 'A dependency of the router is temporarily unavailable; retry with backoff.'), headers: { 'retry-after': '1' } };
    }
    this.logger.error(`router call failed unexpectedly: ${(err as Error)?.stack ?? String(err)}`);
    return { result: errorResult('internal_error', 'The router failed while handling the call.'), headers: {} };
  }

  private checkCredits(account: Account, model: CatalogModel): void {
    if (account.creditBalance < BigInt(model.priceCents) || (model.priceCents > 0 && account.creditBalance <= 0n)) {
      throw new RouterError('insufficient_credits', `The workspace lacks the credits to run ${model.id} (it costs ${model.priceCents}).`);
    }
  }

  private deadlineAt(input: CallInput): number {
    return input.startedAt + this.config.router.deadlineMs;
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

  private deadlineReply(model: CatalogModel, keyed: boolean, handle: string | null): CallReply {
    const collectable = keyed && handle !== null && adapterFor(model.adapterKind)?.collect !== undefined;
    const bound = this.stopping.graceOver ? 'because this replica is shutting down' : `at its ${this.config.router.deadlineMs} ms deadline`;
    const detail = `The router stopped waiting ${bound}; nothing was rejected.${keyed ? ' Retry with the same Idempotency-Key to collect the generation instead of starting another.' : ''}`;
    return {
      result: errorResult('deadline_exceeded', detail),
      headers: collectable ? { 'retry-after': String(this.retryAfterSeconds(model)) } : {},
    };
  }

  /** A new generation: key, slot, dispatch, wait up to the deadline; the generation may outlive the wait. */
  private async fresh(input: CallInput, model: CatalogModel, keyed: { key: string; requestHash: string } | null): Promise<CallReply> {
    this.checkCredits(input.account, model);
    if (!this.usage.recording()) throw new RouterError('service_unavailable', 'The router cannot record calls right now; retry with backoff.', { 'retry-after': '1' });
    if (input.fate.gone()) throw callerGone();
    // The price is held on the cached balance from here until the generation's charge settles it:
    // calls in flight together cannot spend more than the balance holds.
    const held = this.auth.charge(input.account.id, model.priceCents);
    let generation: Generation;
    try {
      // The key is claimed before a slot is taken: a duplicate that loses the claim joins the winner
      // and takes nothing from the workspace's limits (no slot, no count in the window).
      if (keyed) {
        const claimed = await this.usage.insertKeyed({ id: input.callId, accountId: input.account.id, modelId: model.id, key: keyed.key, requestHash: keyed.requestHash, costCents: model.priceCents });
        // Another call took the key between our look and our insert: join it.
        if (!claimed) {
          held(false);
          return await this.keyed(input, model, keyed.key, 1);
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
    const reply: CallReply = deadlineHit ? this.deadlineReply(model, keyed !== null, generation.handle) : { result: ended, headers: {} };
    // Tracked: a stop waits for generations whose callers have their answer already.
    this.usage.track(this.recordEnding(input, model, generation, deadlineHit, keyed !== null, held), `usage record ${input.callId}`);
    return reply;
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

  /** Once the generation has ended and the caller has its answer (or left): what it got, and the charge. */
  private async recordEnding(input: CallInput, model: CatalogModel, generation: Generation, deadlineHit: boolean, keyed: boolean, held: HeldCharge): Promise<void> {
    // The call lasted until its caller had the answer (or left), however long the generation ran on.
    const answeredAt = input.fate.settled.then(() => Date.now());
    const result = await generation.promise;
    // A keyed generation settled its held price when it was stored; this one is charged with its
    // record, which waits for the caller. A price not charged goes back to the balance at once.
    const charged = !keyed && this.isCharged(model, result);
    if (!keyed && !charged) held(false);
    try {
      const delivered = await input.fate.settled;
      const outcome = !delivered ? 'client_disconnected' : deadlineHit ? 'deadline_exceeded' : result.bucket;
      const durationMs = (await answeredAt) - input.startedAt;
      if (keyed) {
        await this.usage.setOutcome(input.callId, outcome, durationMs);
        return;
      }
      await this.usage.insertFinal({
        id: input.callId,
        accountId: input.account.id,
        modelId: model.id,
        outcome,
        resultBucket: this.abandoned(result) ? null : result.bucket,
        // What the caller got (a keyed row keeps the generation's: a replay sends it).
        httpStatus: outcome === result.bucket ? result.status : BUCKET_STATUS[outcome as RouterBucket],
        costCents: model.priceCents,
        charged,
        durationMs,
        startedAt: input.startedAt,
        providerHandle: generation.handle,
      });
    } finally {
      // Written, or given up on after every retry (logged): either way a reload reads the database.
      if (charged) held(true);
    }
  }

  /**
   * storeGeneration, and the charge on the cached balance (see RouterAuthService.charge): the
   * price held at dispatch, or, collecting another replica's generation, one taken now.
   */
  private async storeCharged(id: string, accountId: string, costCents: number, model: CatalogModel, result: GenerationResult, held: HeldCharge | null): Promise<boolean | null> {
    const charged = this.isCharged(model, result);
    const settle = held ?? (charged ? this.auth.charge(accountId, costCents) : null);
    if (!charged) settle?.(false);
    let stored: boolean | null = null;
    try {
      stored = await this.usage.storeGeneration(id, accountId, result, costCents, charged, REPLAYABLE.has(result.bucket));
      return stored;
    } finally {
      // Not stored by this call (another collector was first, or every try failed): not charged by it.
      if (charged) settle?.(stored === true);
    }
  }

  /**
   * Whether the generation was cut off because this replica is stopping, rather than ended by the
   * provider. A keyed one stays `running` (with its handle) so that a retry elsewhere collects it,
   * or dispatches again once it is presumed lost; results worth replaying are kept as they are.
   */
  private abandoned(result: GenerationResult): boolean {
    return this.stopping.graceOver && !REPLAYABLE.has(result.bucket);
  }

  /** Aborts the provider request at its timeout, or when the stop's grace is over; release it once done. */
  private providerBound(ms: number): { signal: AbortSignal; release(): void } {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), ms).unref();
    const cancel = this.stopping.onGraceOver(() => controller.abort());
    return {
      signal: controller.signal,
      release: () => {
        clearTimeout(timer);
        cancel();
      },
    };
  }

  /** Billing rule: a finished generation is charged; a policy refusal only where the model says so. */
  private isCharged(model: CatalogModel, result: GenerationResult): boolean {
    if (result.bucket === 'success') return true;
    return result.bucket === 'content_policy_violation' && model.chargesOnPolicyRejection === 'yes';
  }

  /** Dispatches at the provider; the slot is held until the generation ends, whoever waits for it. */
  private start(input: CallInput, model: CatalogModel, slot: Slot, keyed: boolean, held: HeldCharge): Generation {
    const adapter = adapterFor(model.adapterKind);
    const generation: Generation = { handle: null, promise: NOT_STARTED };
    const bound = this.providerBound(model.timeoutMs);
    const dispatched = adapter
      ? adapter.dispatch(model, input.rawBody!, {
          signal: bound.signal,
          onHandle: (handle) => {
            generation.handle = handle;
            if (keyed) this.usage.track(this.usage.setHandle(input.callId, handle), `handle of ${input.callId}`);
          },
        })
      : Promise.resolve(errorResult('internal_error', `The router has no adapter for ${model.adapterKind}.`));
    generation.promise = dispatched
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
        if (this.abandoned(result)) {
          // Not charged here: whoever collects it later charges it.
          held(false);
          this.generations.delete(input.callId);
          return result;
        }
        await this.storeCharged(input.callId, input.account.id, model.priceCents, model, result, held);
        this.generations.delete(input.callId);
        return result;
      });
      this.usage.track(generation.promise, `result of ${input.callId}`);
    }
    return generation;
  }

  /** A call with an Idempotency-Key: replay, join the generation already under way, or dispatch. */
  private async keyed(input: CallInput, model: CatalogModel, key: string, attempt: number): Promise<CallReply> {
    if (!KEY_PATTERN.test(key)) throw new RouterError('invalid_input', 'Idempotency-Key must be 1 to 255 visible ASCII characters.');
    if (attempt > 3) throw new RouterError('service_unavailable', 'The Idempotency-Key is contended; retry shortly.', { 'retry-after': '1' });
    const requestHash = createHash('sha256').update(model.id).update('\n').update(input.rawBody!).digest('hex');
    let row = await this.usage.findByKey(input.account.id, key);
    if (row && row.state === 'completed' && row.createdAt.getTime() < Date.now() - KEY_LIFETIME_MS) {
      await this.usage.freeKey(row.id);
      row = null;
    }
    if (!row) return this.fresh(input, model, { key, requestHash });
    if (row.requestHash !== requestHash) {
      throw new RouterError('invalid_input', 'This Idempotency-Key was already used with a different model or body; use a new key for a new request.');
    }
    const joined = await this.join(input, model, row);
    if (joined === 'dispatch') return this.keyed(input, model, key, attempt + 1);
    this.recordJoin(input, model, row.id, joined);
    return joined;
  }

  private recordJoin(input: CallInput, model: CatalogModel, originalId: string, reply: CallReply): void {
    const recorded = input.fate.settled.then((delivered) =>
      this.usage.insertFinal({
        id: input.callId,
        accountId: input.account.id,
        modelId: model.id,
        outcome: delivered ? reply.result.bucket : 'client_disconnected',
        resultBucket: reply.result.bucket === 'deadline_exceeded' ? null : reply.result.bucket,
        httpStatus: reply.result.status,
        costCents: 0,
        charged: false,
        durationMs: Date.now() - input.startedAt,
        startedAt: input.startedAt,
        replayOf: originalId,
      }),
    );
    this.usage.track(recorded, `usage record ${input.callId}`);
  }

  /**
   * Waits on the generation of an earlier call with the same key, up to this call's deadline:
   * in this process through its promise, elsewhere through its row; with a provider handle the
   * generation is collected from the provider directly (never dispatched again).
   */
  private async join(input: CallInput, model: CatalogModel, first: KeyedRow): Promise<CallReply | 'dispatch'> {
    const deadlineAt = this.deadlineAt(input);
    const replayed = { 'idempotent-replayed': 'true' };
    let row: KeyedRow | null = first;
    for (;;) {
      if (!row) return 'dispatch';
      if (row.state === 'completed') {
        // Also when the result freed the key: this call waited on that generation, on this replica
        // or another, and gets how it ended rather than a second one.
        if (row.httpStatus === null || !row.resultBucket) return 'dispatch';
        const stored: GenerationResult = {
          bucket: row.resultBucket as GenerationResult['bucket'],
          status: row.httpStatus,
          contentType: row.responseType ?? 'application/json',
          body: Buffer.from(row.responseBody ?? new Uint8Array()),
        };
        return { result: stored, headers: replayed };
      }
      if (row.state !== 'running') return 'dispatch';
      const generation = this.generations.get(row.id) ?? (row.providerHandle ? this.collect(model, row) : undefined);
      if (generation) {
        const ended = await raceDeadline(generation.promise, deadlineAt, this.stopping);
        if (ended === DEADLINE) return this.deadlineReply(model, true, generation.handle);
        return { result: ended, headers: replayed };
      }
      // Running elsewhere without a handle yet: a synchronous call in flight on another replica.
      if (Date.now() > row.createdAt.getTime() + model.timeoutMs + LOST_CALL_GRACE_MS) {
        // Its replica died before finishing; nothing can be collected, so dispatch again.
        await this.usage.abandon(row.id);
        return 'dispatch';
      }
      const remaining = deadlineAt - Date.now();
      if (remaining <= 0 || this.stopping.graceOver) return this.deadlineReply(model, true, null);
      await sleep(Math.min(100, remaining));
      row = await this.usage.find(row.id);
    }
  }

  /** Collects a generation by its handle; one collector per process per generation. */
  private collect(model: CatalogModel, row: KeyedRow): Generation | undefined {
    const adapter = adapterFor(model.adapterKind);
    if (!adapter?.collect || !row.providerHandle) return undefined;
    const existing = this.generations.get(row.id);
    if (existing) return existing;
    // Past the provider's deadline too (its replica died before storing how it ended), a last look:
    // the generation may have finished meanwhile.
    const remaining = Math.max(LAST_LOOK_MS, row.createdAt.getTime() + model.timeoutMs - Date.now());
    const handle = row.providerHandle;
    const bound = this.providerBound(remaining);
    const generation: Generation = {
      handle,
      promise: adapter
        .collect(model, handle, bound.signal)
        .catch((err: Error) => {
          this.logger.error(`collecting ${row.id} failed: ${err.stack ?? err.message}`);
          return errorResult('internal_error', 'The router failed while collecting the generation.');
        })
        .then(async (result) => {
          if (this.abandoned(result)) return result;
          const first = await this.storeCharged(row.id, row.accountId, row.costCents, model, result, null);
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

/**
 * Nothing is dispatched for a caller that has gone: no one would receive the result, yet it would
 * be billed. The call is recorded as client_disconnected, on the way every refused call is.
 */
function callerGone(): RouterError {
  return new RouterError('client_disconnected', 'The caller closed the connection before the call was dispatched.');
}

/** The promise's value, or DEADLINE once `at` (epoch ms) passes or the stop's grace is over, whichever is first. */
function raceDeadline<T>(promise: Promise<T>, at: number, stopping: Draining): Promise<T | typeof DEADLINE> {
  const ms = at - Date.now();
  if (ms <= 0 || stopping.graceOver) return Promise.resolve(DEADLINE);
  let timer: NodeJS.Timeout | undefined;
  let cancel: () => void = () => undefined;
  const deadline = new Promise<typeof DEADLINE>((resolve) => {
    timer = setTimeout(() => resolve(DEADLINE), ms);
    cancel = stopping.onGraceOver(() => resolve(DEADLINE));
  });
  return Promise.race([promise, deadline]).finally(() => {
    clearTimeout(timer);
    cancel();
  });
}
