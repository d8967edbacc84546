// Path segments and ids exactly as the contract constrains them.

const SEGMENT = /^[a-z0-9]+([._-][a-z0-9]+)*$/;

export const PROVIDER_MAX = 64;
export const MODEL_MAX = 128;
export const MODEL_ID_MAX = 193;

export function isProviderSegment(value: string): boolean {
  return value.length <= PROVIDER_MAX && SEGMENT.test(value);
}

export function isModelSegment(value: string): boolean {
  return value.length <= MODEL_MAX && SEGMENT.test(value);
}

export function isModelId(value: string): boolean {
  const slash = value.indexOf('/');
  return slash > 0 && value.length <= MODEL_ID_MAX && isProviderSegment(value.slice(0, slash)) && isModelSegment(value.slice(slash + 1));
}

/** Entitlements name model ids or `provider/*`; an empty list entitles every model. */
export function isEntitled(entitlements: readonly string[], modelId: string): boolean {
  if (entitlements.length === 0) return true;
  const provider = modelId.slice(0, modelId.indexOf('/'));
  return entitlements.some((e) => e === '*' || e === modelId || e === `${provider}/*`);
}
