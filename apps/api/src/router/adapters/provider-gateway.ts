import { Injectable } from '@nestjs/common';
import { errorResult, type GenerationResult, type UpstreamModel } from './adapter.js';
import { adapterFor } from './index.js';

/** What a call hands its provider: the body as the caller sent it, and as parsed. */
export interface ProviderInput {
  raw: Buffer;
  parsed: unknown;
}

/** Where media re-hosted for a call goes: its workspace, its id, and the origin its signed URLs name. */
export interface MediaTarget {
  accountId: string;
  callId: string;
  origin: string;
}

export interface GatewayContext {
  signal: AbortSignal;
  media: MediaTarget;
  /** Called as soon as the provider accepted a generation it can be asked about later. */
  onHandle?(handle: string): void;
}

/** The one way calls reach providers: the model's adapter, then what every result goes through. */
@Injectable()
export class ProviderGateway {
  canCollect(model: UpstreamModel & { adapterKind: string }): boolean {
    return adapterFor(model.adapterKind)?.collect !== undefined;
  }

  async dispatch(model: UpstreamModel & { adapterKind: string }, input: ProviderInput, context: GatewayContext): Promise<GenerationResult> {
    const adapter = adapterFor(model.adapterKind);
    if (!adapter) return errorResult('internal_error', `The router has no adapter for ${model.adapterKind}.`);
    return adapter.dispatch(model, input.raw, { signal: context.signal, onHandle: (handle) => context.onHandle?.(handle) });
  }

  async collect(model: UpstreamModel & { adapterKind: string }, handle: string, context: GatewayContext): Promise<GenerationResult> {
    const adapter = adapterFor(model.adapterKind);
    if (!adapter?.collect) return errorResult('internal_error', `The router cannot collect generations of ${model.adapterKind}.`);
    return adapter.collect(model, handle, context.signal);
  }
}
