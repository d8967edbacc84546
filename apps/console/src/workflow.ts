// Reading what a user pastes or drops into the submit page. No DOM here: the unit tests run it in Node.

export type Workflow = Record<string, { class_type: string; inputs: Record<string, unknown>; _meta?: { title?: string } }>;

export interface WorkflowNode {
  id: string;
  classType: string;
  title: string | null;
  inputs: [string, unknown][];
}

/** A workflow in the engine's API format, or why the text is not one. */
export type Parsed = { ok: true; workflow: Workflow } | { ok: false; problem: string };

function isApiFormat(value: unknown): value is Workflow {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return false;
  const nodes = Object.values(value as Record<string, unknown>);
  return nodes.length > 0 && nodes.every((n) => !!n && typeof n === 'object' && typeof (n as { class_type?: unknown }).class_type === 'string');
}

/**
 * Takes the graph itself, or a request body that carries it (`{"workflow": …}` as v2 takes it,
 * `{"prompt": …}` as v1 does). The editor's own save format (nodes and links) is refused with
 * the way out: the engine runs the API format, which the editor exports separately.
 */
export function parseWorkflow(text: string): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, problem: `This is not JSON: ${(err as Error).message}` };
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const wrapped = value as { workflow?: unknown; prompt?: unknown; nodes?: unknown; links?: unknown };
    if (Array.isArray(wrapped.nodes) && Array.isArray(wrapped.links)) {
      return { ok: false, problem: 'This is the editor\'s workflow format (nodes and links). Export it in the API format instead (Workflow → Export (API)).' };
    }
    for (const inner of [wrapped.workflow, wrapped.prompt]) if (isApiFormat(inner)) return { ok: true, workflow: inner };
  }
  if (isApiFormat(value)) return { ok: true, workflow: value };
  return { ok: false, problem: 'A workflow in the API format is an object of nodes, each with a "class_type" and "inputs".' };
}

/** The nodes in id order (numeric ids by their number), as the page lists them. */
export function nodesOf(workflow: Workflow): WorkflowNode[] {
  return Object.entries(workflow)
    .map(([id, n]) => ({ id, classType: n.class_type, title: n._meta?.title ?? null, inputs: Object.entries(n.inputs ?? {}) }))
    .sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }));
}

/** An input as the page shows it: a link to another node's output, or the value. */
export function describeInput(value: unknown): string {
  if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'number') return `← node ${value[0]}, output ${value[1]}`;
  if (value && typeof value === 'object' && (value as { __type?: unknown }).__type === 'core/ASSET') {
    const info = (value as { info?: { id?: string; file_path?: string } }).info ?? {};
    return `asset ${info.file_path ?? info.id ?? ''}`.trim();
  }
  const text = JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

/** Node ids of LoadImage-like nodes, whose `image` input names one of the caller's files. */
export function imageInputs(workflow: Workflow): string[] {
  return nodesOf(workflow).filter((n) => n.classType === 'LoadImage' && n.inputs.some(([k]) => k === 'image')).map((n) => n.id);
}

/** Sets node `id`'s `image` input to a file name, in a copy. */
export function withImage(workflow: Workflow, id: string, fileName: string): Workflow {
  const copy = structuredClone(workflow);
  copy[id] = { ...copy[id]!, inputs: { ...copy[id]!.inputs, image: fileName } };
  return copy;
}

/** A first workflow on an uploaded image: load it by its file name, invert it, save the result. */
export function invertImageWorkflow(fileName: string): Workflow {
  return {
    '1': { class_type: 'LoadImage', inputs: { image: fileName } },
    '2': { class_type: 'ImageInvert', inputs: { image: ['1', 0] } },
    '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'inverted' } },
  };
}
