import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import { componentLogger } from '#libs/logging';
import { CONFIG } from '../../core/tokens.js';
import { MediaRehostService, type MediaTarget } from '../media/media-rehost.service.js';
import { errorResult, type AdapterKind, type GenerationResult, type ProviderAdapter, type ProviderInput, type UpstreamModel } from './adapter.js';
import { createAdapters } from './registry.js';

export type { MediaTarget } from '../media/media-rehost.service.js';

export interface GatewayContext {
  signal: AbortSignal;
  media: MediaTarget;
  /** Called as soon as the provider accepted a generation it can be asked about later. */
  onHandle?(handle: string): void;
}

// The shortest credential the answer check looks for: anything shorter would be found by chance.
const MIN_SECRET = 6;

/**
 * The one way calls reach providers: the model's adapter (holding the router's credentials at
 * that provider), then what every result goes through before anyone sees it: its media
 * re-hosted, and a last check that no credential of the router's rides along in it.
 */
@Injectable()
export class ProviderGateway {
  private readonly logger = componentLogger('RouterProviders');
  private readonly adapters: Record<AdapterKind, ProviderAdapter>;
  private readonly warnedUnconfigured = new Set<string>();

  constructor(
    @Inject(CONFIG) config: Config,
    private readonly media: MediaRehostService,
  ) {
    this.adapters = createAdapters(config.router.providerKeys);
  }

  private adapterOf(model: UpstreamModel): ProviderAdapter | undefined {
    return this.adapters[model.adapterKind as AdapterKind];
  }

  canCollect(model: UpstreamModel): boolean {
    return this.adapterOf(model)?.collect !== undefined;
  }

  async dispatch(model: UpstreamModel, input: ProviderInput, context: GatewayContext): Promise<GenerationResult> {
    const adapter = this.adapterOf(model);
    if (!adapter) return errorResult('internal_error', `The router has no adapter for ${model.adapterKind}.`);
    if (!adapter.configured()) return this.unconfigured(model);
    const result = await adapter.dispatch(model, input, { signal: context.signal, onHandle: (handle) => context.onHandle?.(handle) });
    return this.finish(adapter, model, result, context);
  }

  async collect(model: UpstreamModel, handle: string, context: GatewayContext): Promise<GenerationResult> {
    const adapter = this.adapterOf(model);
    if (!adapter?.collect) return errorResult('internal_error', `The router cannot collect generations of ${model.adapterKind}.`);
    if (!adapter.configured()) return this.unconfigured(model);
    return this.finish(adapter, model, await adapter.collect(model, handle, context.signal), context);
  }

  private async finish(adapter: ProviderAdapter, model: UpstreamModel, result: GenerationResult, context: GatewayContext): Promise<GenerationResult> {
    const rehosted = result.media ? await this.media.rehost(result, model, context.media, context.signal) : result;
    for (const secret of adapter.secrets()) {
      if (secret.length >= MIN_SECRET && rehosted.body.includes(secret)) {
        this.logger.warn(`an answer of ${model.provider} for ${model.id} carried one of the router's credentials; withheld`);
        return errorResult('provider_error', 'The provider answered with something the router may not pass on.');
      }
    }
    return rehosted;
  }

  private unconfigured(model: UpstreamModel): GenerationResult {
    if (!this.warnedUnconfigured.has(model.provider)) {
      this.warnedUnconfigured.add(model.provider);
      this.logger.error(`no credentials for ${model.provider} are configured: its models answer service_unavailable (docs/router.md)`);
    }
    return errorResult('service_unavailable', `The router cannot call ${model.provider} right now; retry later.`);
  }
}
