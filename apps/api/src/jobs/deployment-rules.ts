import type { ApiWorkflow } from '#libs/workflow';

function isLink(v: unknown): boolean {
  return Array.isArray(v) && v.length === 2 && (typeof v[0] === 'string' || typeof v[0] === 'number') && Number.isInteger(v[1]);
}

/**
 * A deployment accepts its pinned workflow with other literal values only: the same node ids,
 * classes and links. Returns problems per node in the v2 {field, reason} shape (empty when fine).
 */
export function checkPinnedStructure(pinned: ApiWorkflow, submitted: unknown): Record<string, { field: string; reason: string }[]> {
  const problems: Record<string, { field: string; reason: string }[]> = {};
  const add = (id: string, field: string, reason: string) => (problems[id] ??= []).push({ field, reason });
  if (typeof submitted !== 'object' || submitted === null || Array.isArray(submitted)) {
    return { '': [{ field: 'workflow', reason: 'must be an object in API format' }] };
  }
  const sub = submitted as Record<string, { class_type?: unknown; inputs?: Record<string, unknown> }>;
  for (const id of Object.keys(pinned)) if (!(id in sub)) add(id, 'node', 'node of the pinned workflow is missing');
  for (const [id, node] of Object.entries(sub)) {
    const pin = pinned[id];
    if (!pin) {
      add(id, 'node', 'node is not part of the pinned workflow');
      continue;
    }
    if (node?.class_type !== pin.class_type) add(id, 'class_type', `must be ${pin.class_type}`);
    const inputs = node?.inputs ?? {};
    for (const [name, value] of Object.entries(pin.inputs ?? {})) {
      const given = inputs[name];
      if (isLink(value)) {
        if (!isLink(given) || String((given as unknown[])[0]) !== String((value as unknown[])[0]) || (given as unknown[])[1] !== (value as unknown[])[1]) {
          add(id, name, `must stay linked to ${JSON.stringify(value)}`);
        }
      } else if (isLink(given)) {
        add(id, name, 'must stay a literal value');
      }
    }
    for (const name of Object.keys(inputs)) if (!(name in (pin.inputs ?? {}))) add(id, name, 'is not an input of the pinned workflow');
  }
  return problems;
}
