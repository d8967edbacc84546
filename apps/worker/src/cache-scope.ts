import { createHash } from 'node:crypto';
import { inputChoices, type NodeDefinitions } from '#libs/workflow';
import type { ApiWorkflow } from './input-staging.js';

/**
 * The engine caches a node's output under its class and inputs, its ancestors' included, and
 * tells the client which nodes it took from that cache (`execution_cached`). Across accounts a
 * hit would tell a tenant that the job before its own, another tenant's, used exactly the inputs
 * it guessed: a prompt's text, an image. So each node gets one more input naming the account: the
 * engine passes it to no node (it declares no such input) but keys its cache on it.
 *
 * Left shared: nodes that only pick files the engine itself lists (checkpoints, VAEs, LoRA
 * files): the same for every tenant, and the costliest outputs to make again.
 */
export const CACHE_SCOPE_INPUT = 'cloud_cache_scope';

export function scopeEngineCache(workflow: ApiWorkflow, accountId: string, defs: NodeDefinitions | null): ApiWorkflow {
  const scope = createHash('sha256').update(accountId).digest('hex').slice(0, 16);
  const scoped: ApiWorkflow = {};
  for (const [id, node] of Object.entries(workflow)) {
    scoped[id] = picksEngineFilesOnly(node, defs) ? node : { ...node, inputs: { ...node.inputs, [CACHE_SCOPE_INPUT]: scope } };
  }
  return scoped;
}

/** Every input is a literal among the choices the engine lists for it: no link, no asset, no free value. */
function picksEngineFilesOnly(node: ApiWorkflow[string], defs: NodeDefinitions | null): boolean {
  const def = defs && Object.hasOwn(defs, node.class_type) ? defs[node.class_type] : undefined;
  const inputs = Object.entries(node.inputs ?? {});
  if (!def || inputs.length === 0) return false;
  return inputs.every(([name, value]) => {
    const entry = def.input?.required?.[name] ?? def.input?.optional?.[name];
    return typeof value === 'string' && (inputChoices(entry)?.includes(value) ?? false);
  });
}
