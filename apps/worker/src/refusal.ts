import type { PromptErrorBody } from '#libs/engine-protocol';

/**
 * The engine's reason for refusing a prompt, in one line. Its top-level message is often only
 * "Prompt outputs failed validation"; what failed, and where, is in `node_errors`.
 */
export function refusalMessage(body: PromptErrorBody): { message: string; nodeId: string | null; classType: string | null } {
  const parts = [body.error?.message || body.error?.type || 'refused'];
  const nodeErrors = body.node_errors && !Array.isArray(body.node_errors) ? Object.entries(body.node_errors) : [];
  for (const [nodeId, node] of nodeErrors) {
    const reasons = (node.errors ?? []).map((e) => (e.details ? `${e.message}: ${e.details}` : e.message));
    parts.push(`node ${nodeId} (${node.class_type}): ${reasons.join('; ')}`);
  }
  if (nodeErrors.length === 0 && body.error?.details) parts.push(body.error.details);
  const first = nodeErrors[0];
  return { message: `The engine refused the workflow: ${parts.join('. ')}`, nodeId: first?.[0] ?? null, classType: first?.[1].class_type ?? null };
}
