import type { AdapterKind, ProviderAdapter } from './adapter.js';
import { SubmitPollAdapter } from './submit-poll.adapter.js';
import { SyncJsonAdapter } from './sync-json.adapter.js';
import { ValidatingJsonAdapter } from './validating-json.adapter.js';

export type { AdapterKind, GenerationResult, ProviderAdapter, UpstreamModel } from './adapter.js';
export { ADAPTER_KINDS, errorResult, validationResult } from './adapter.js';
export { ProviderGateway, type GatewayContext, type MediaTarget, type ProviderInput } from './provider-gateway.js';

const ADAPTERS: Record<AdapterKind, ProviderAdapter> = {
  'sync-json': new SyncJsonAdapter(),
  'submit-poll': new SubmitPollAdapter(),
  'validating-json': new ValidatingJsonAdapter(),
};

export function adapterFor(kind: string): ProviderAdapter | undefined {
  return ADAPTERS[kind as AdapterKind];
}
