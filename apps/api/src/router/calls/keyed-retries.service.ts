import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Draining } from '../../core/draining.js';
import type { GenerationResult } from '../adapters/index.js';
import type { CatalogModel } from '../catalog/catalog.service.js';
import { RouterError } from '../errors.js';
import { DEADLINE, raceDeadline, type CallInput, type CallReply } from './call.js';
import { CLAIM_LOST, DispatchService } from './dispatch.service.js';
import { SettlementService } from './settlement.service.js';
import { LOST_CALL_GRACE_MS, UsageService, type KeyedRow } from './usage.service.js';

// Keyed retries (Idempotency-Key, the public router's rules): the first call with a key dispatches;
// a later one with the same model and body gets the recorded result (`Idempotent-Replayed: true`),
// or, while the first still runs, waits on the same generation (collecting it from the provider
// by its handle when the replica running it is gone); the same key with another model or body is
// refused with 409 and dispatches nothing. Records are kept 24 h.

export const KEY_LIFETIME_MS = 24 * 3600 * 1000;
const REPLAYED = { 'idempotent-replayed': 'true' } as const;

@Injectable()
export class KeyedRetriesService {
  constructor(
    private readonly dispatch: DispatchService,
    private readonly usage: UsageService,
    private readonly settlement: SettlementService,
    private readonly stopping: Draining,
  ) {}

  /** A call with an Idempotency-Key (parsed by RouterIdempotencyKeySchema): replay, join the generation already under way, or dispatch. */
  async run(input: CallInput, model: CatalogModel, key: string, attempt = 0): Promise<CallReply> {
    if (attempt > 3) throw new RouterError('service_unavailable', 'The Idempotency-Key is contended; retry shortly.', { 'retry-after': '1' });
    const requestHash = createHash('sha256').update(model.id).update('\n').update(input.rawBody!).digest('hex');
    let row = await this.usage.findByKey(input.account.id, key);
    if (row && row.state === 'completed' && row.createdAt.getTime() < Date.now() - KEY_LIFETIME_MS) {
      await this.usage.freeKey(row.id);
      row = null;
    }
    if (!row) {
      const fresh = await this.dispatch.fresh(input, model, { key, requestHash });
      // Another call took the key between our look and our claim: join it.
      return fresh === CLAIM_LOST ? this.run(input, model, key, attempt + 1) : fresh;
    }
    if (row.requestHash !== requestHash) {
      throw new RouterError('invalid_input', 'This Idempotency-Key was already used with a different model or body; use a new key for a new request.', {}, 409);
    }
    const joined = await this.join(input, model, row);
    if (joined === 'dispatch') return this.run(input, model, key, attempt + 1);
    this.settlement.recordJoin(input, model, row.id, joined);
    return joined;
  }

  /**
   * Waits on the generation of an earlier call with the same key, up to this call's deadline:
   * in this process through its promise, elsewhere through its row; with a provider handle the
   * generation is collected from the provider directly (never dispatched again).
   */
  private async join(input: CallInput, model: CatalogModel, first: KeyedRow): Promise<CallReply | 'dispatch'> {
    const deadlineAt = this.dispatch.deadlineAt(input);
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
        return { result: stored, headers: { ...REPLAYED } };
      }
      if (row.state !== 'running') return 'dispatch';
      const generation = this.dispatch.running(row.id) ?? (row.providerHandle ? this.dispatch.collect(model, row, input.origin) : undefined);
      if (generation) {
        const ended = await raceDeadline(generation.promise, deadlineAt, this.stopping);
        if (ended === DEADLINE) return this.dispatch.deadlineReply(model, true, generation.handle);
        return { result: ended, headers: { ...REPLAYED } };
      }
      // Running elsewhere without a handle yet: a synchronous call in flight on another replica.
      if (Date.now() > row.createdAt.getTime() + model.timeoutMs + LOST_CALL_GRACE_MS) {
        // Its replica died before finishing; nothing can be collected, so dispatch again.
        await this.usage.abandon(row.id);
        return 'dispatch';
      }
      const remaining = deadlineAt - Date.now();
      if (remaining <= 0 || this.stopping.graceOver) return this.dispatch.deadlineReply(model, true, null);
      await sleep(Math.min(100, remaining));
      row = await this.usage.find(row.id);
    }
  }
}
