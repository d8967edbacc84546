import { readFileSync } from 'node:fs';
import type { NodeDefinition } from '#libs/engine-protocol';

/**
 * Node definitions as GET /object_info reports them on ComfyUI 0.3.64, for the classes the
 * sim-engine runs (taken from the recorded object_info_full.json, its test fixture). Data, not
 * code: engine-definitions.json beside this file (the build copies it into dist/).
 *
 * Read with integers beyond 2^53 as BigInts (a seed's bound is 2^64 - 1): the engine writes its
 * Python ints whole, and so does the sim-engine (pythonJsonDumps).
 */
function loadDefinitions(): Record<string, NodeDefinition> {
  const text = readFileSync(new URL('./engine-definitions.json', import.meta.url), 'utf8');
  const reviver = (_key: string, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && !Number.isSafeInteger(value) && context?.source && /^-?\d+$/.test(context.source) ? BigInt(context.source) : value;
  return JSON.parse(text, reviver as (key: string, value: unknown) => unknown) as Record<string, NodeDefinition>;
}

export const ENGINE_NODE_DEFINITIONS: Record<string, NodeDefinition> = loadDefinitions();
