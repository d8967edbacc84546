export type { AdapterKind, GenerationResult, ProviderAdapter, ProviderInput, UpstreamModel } from './adapter.js';
export { ADAPTER_KINDS, errorResult, validationResult } from './adapter.js';
export { ProviderGateway, type GatewayContext, type MediaTarget } from './provider-gateway.js';
