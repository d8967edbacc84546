import { Injectable } from '@nestjs/common';
import { Draining } from '../../core/draining.js';
import type { GenerationResult } from '../adapters/index.js';
import type { CatalogModel } from '../catalog/catalog.service.js';
import { RouterCreditsService, type HeldCharge } from '../credits/router-credits.service.js';
import { BUCKET_STATUS, type RouterBucket } from '../errors.js';
import type { CallInput, CallReply, Generation } from './call.js';
import { UsageService, type FinalRecord } from './usage.service.js';

// Settlement: once a generation has ended, what it costs the workspace, what the call's usage and
// audit record says, and which results a later retry with the same key gets back.

// Results a later retry gets back as they were; other endings free the key so a later retry
// dispatches anew. A duplicate that arrived while the generation ran gets its result, whatever it is.
const REPLAYABLE = new Set(['success', 'content_policy_violation', 'invalid_input']);

@Injectable()
export class SettlementService {
  constructor(
    private readonly usage: UsageService,
    private readonly credits: RouterCreditsService,
    private readonly stopping: Draining,
  ) {}

  /**
   * Billing rule: a finished generation is charged; a policy refusal as the model's catalog entry
   * states (`yes`, `no`), or, where the provider's billing depends on where it refused
   * (`unknown`), as its adapter says: a refusal after generating is charged, one of the input is not.
   */
  isCharged(model: CatalogModel, result: GenerationResult): boolean {
    if (result.bucket === 'success') return true;
    if (result.bucket !== 'content_policy_violation') return false;
    if (model.chargesOnPolicyRejection === 'yes') return true;
    if (model.chargesOnPolicyRejection === 'no') return false;
    return result.providerCharged ?? true;
  }

  /** Whether later retries with the key get this result back rather than a new generation. */
  replayable(result: GenerationResult): boolean {
    return REPLAYABLE.has(result.bucket);
  }

  /**
   * Whether the generation was cut off because this replica is stopping, rather than ended by the
   * provider. A keyed one stays `running` (with its handle) so that a retry elsewhere collects it,
   * or dispatches again once it is presumed lost; results worth replaying are kept as they are.
   */
  abandoned(result: GenerationResult): boolean {
    return this.stopping.graceOver && !REPLAYABLE.has(result.bucket);
  }

  /**
   * Once the generation has ended and the caller has its answer (or left): what it got, and the
   * charge. The ending is read from the call first, then written: the call's request, reply and
   * result do not wait for the usage batch with it.
   */
  recordEnding(input: CallInput, model: CatalogModel, generation: Generation, deadlineHit: boolean, keyed: boolean, held: HeldCharge): Promise<void> {
    return this.endingOf(input, model, generation, deadlineHit, keyed, held).then(async (ending) => {
      try {
        if ('record' in ending) await this.usage.insertFinal(ending.record);
        else await this.usage.setOutcome(ending.callId, ending.outcome, ending.durationMs);
      } finally {
        // Written, or given up on after every retry (logged): either way a reload reads the database.
        if ('record' in ending && ending.record.charged) held(true);
      }
    });
  }

  /**
   * How the call ended: an unkeyed call's whole record, or a keyed call's outcome (its row exists).
   * A price not charged goes back here; a charged one once the record is written.
   */
  private async endingOf(input: CallInput, model: CatalogModel, generation: Generation, deadlineHit: boolean, keyed: boolean, held: HeldCharge): Promise<{ record: FinalRecord } | { callId: string; outcome: string; durationMs: number }> {
    // The call lasted until its caller had the answer (or left), however long the generation ran on.
    const answeredAt = input.fate.settled.then(() => Date.now());
    const result = await generation.promise;
    // A keyed generation settled its held price when it was stored; this one is charged with its
    // record, which waits for the caller. A price not charged goes back to the balance at once.
    const charged = !keyed && this.isCharged(model, result);
    if (!keyed && !charged) held(false);
    // Neither promise rejects (CallerFate), so a charged price always reaches recordEnding's settling.
    const delivered = await input.fate.settled;
    const durationMs = (await answeredAt) - input.startedAt;
    const outcome = !delivered ? 'client_disconnected' : deadlineHit ? 'deadline_exceeded' : result.bucket;
    if (keyed) return { callId: input.callId, outcome, durationMs };
    return {
      record: {
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
      },
    };
  }

  /**
   * Stores a keyed generation's result (see UsageService.storeGeneration) and settles its charge:
   * the price held at dispatch, or, collecting another replica's generation, one held now. Null
   * when every try to store failed; false when another collector stored it first.
   */
  async storeCharged(id: string, accountId: string, costCents: number, model: CatalogModel, result: GenerationResult, held: HeldCharge | null): Promise<boolean | null> {
    const charged = this.isCharged(model, result);
    const settle = held ?? (charged ? this.credits.hold(accountId, costCents) : null);
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

  /** The record of a keyed retry that got another call's generation: never charged itself. */
  recordJoin(input: CallInput, model: CatalogModel, originalId: string, reply: CallReply): void {
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
}
