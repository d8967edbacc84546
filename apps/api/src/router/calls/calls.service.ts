import { Injectable } from '@nestjs/common';
import { RouterIdempotencyKeySchema } from '#libs/contracts';
import type { Account } from '#libs/db';
import { componentLogger } from '#libs/logging';
import { parseWith } from '../../contract/index.js';
import { toErrorShape } from '../../http/error-body.js';
import { errorResult, validationResult } from '../adapters/index.js';
import { CatalogService, type CatalogModel } from '../catalog/catalog.service.js';
import { isEntitled, isModelSegment, isProviderSegment } from '../catalog/model-id.js';
import { closestIds } from '../catalog/suggestions.js';
import { RouterError, RouterValidationError } from '../errors.js';
import type { CallInput, CallReply } from './call.js';
import { CLAIM_LOST, DispatchService } from './dispatch.service.js';
import { KeyedRetriesService } from './keyed-retries.service.js';
import { UsageService } from './usage.service.js';

export type { CallerFate, CallInput, CallReply } from './call.js';

/** One router call from its request to its reply: the model, its input, then dispatch or a keyed retry. */
@Injectable()
export class CallsService {
  private readonly logger = componentLogger('RouterCalls');

  constructor(
    private readonly catalog: CatalogService,
    private readonly dispatch: DispatchService,
    private readonly keyed: KeyedRetriesService,
    private readonly usage: UsageService,
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
      const key = parseWith(RouterIdempotencyKeySchema, input.idempotencyKeyHeader, (issues) => new RouterError('invalid_input', issues[0]!.message));
      if (key !== undefined) return await this.keyed.run(input, model, key);
      const reply = await this.dispatch.fresh(input, model, null);
      if (reply === CLAIM_LOST) throw new Error('an unkeyed call cannot lose a key claim');
      return reply;
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
}
