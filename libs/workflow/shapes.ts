import type { ValidationOutcome } from './validate.js';

type Failed = Extract<ValidationOutcome, { ok: false }>;

/** v2: `details.node_errors` keyed by node id, each a list of {field, reason}. */
export function toV2NodeErrors(outcome: Failed): Record<string, { field: string; reason: string }[]> {
  const out: Record<string, { field: string; reason: string }[]> = {};
  for (const [id, e] of Object.entries(outcome.nodeErrors)) {
    out[id] = e.problems.map((p) => ({ field: p.field, reason: p.details && p.details !== p.field ? `${p.message}: ${p.details}` : p.message }));
  }
  // A problem that stops validation at one node (an unknown class, say) is that node's too.
  if (outcome.node && !Object.hasOwn(out, outcome.node.id)) out[outcome.node.id] = [{ field: outcome.node.field, reason: outcome.error.message }];
  return out;
}

/** v1: the engine's own 400 body, `{error, node_errors}`. */
export function toEngineErrorBody(outcome: Failed): { error: Record<string, unknown>; node_errors: Record<string, unknown> } {
  const node_errors: Record<string, unknown> = {};
  for (const [id, e] of Object.entries(outcome.nodeErrors)) {
    node_errors[id] = {
      errors: e.problems.map((p) => ({ type: p.type, message: p.message, details: p.details, extra_info: p.extra_info })),
      dependent_outputs: e.dependent_outputs,
      class_type: e.class_type,
    };
  }
  return { error: { ...outcome.error, extra_info: {} }, node_errors };
}
