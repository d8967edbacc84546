// Checks a workflow in the engine's API format against the engine's node definitions
// (`GET /object_info`) before a job exists. The problems carry the engine's own error types and
// messages so v1 can answer in the engine's 400 shape and v2 in its {field, reason} lists.

import { isStorableText, rawInteger } from '#libs/contracts';

export interface NodeDefinition {
  input?: { required?: Record<string, unknown>; optional?: Record<string, unknown>; hidden?: Record<string, unknown> };
  output?: unknown[];
  output_node?: boolean;
  [key: string]: unknown;
}
export type NodeDefinitions = Record<string, NodeDefinition>;

export type ApiWorkflow = Record<string, { class_type: string; inputs: Record<string, unknown>; _meta?: unknown }>;

export interface NodeProblem {
  /** The engine's error type, e.g. `required_input_missing`. */
  type: string;
  message: string;
  details: string;
  field: string;
  extra_info: Record<string, unknown>;
}

export interface WorkflowProblem {
  type: 'invalid_prompt' | 'prompt_no_outputs' | 'prompt_outputs_failed_validation';
  message: string;
  details: string;
}

export type ValidationOutcome =
  | { ok: true; outputs: string[] }
  | {
      ok: false;
      error: WorkflowProblem;
      nodeErrors: Record<string, { class_type: string; problems: NodeProblem[]; dependent_outputs: string[] }>;
      /** The node a prompt-level problem is about: the engine names it only in `details`. */
      node?: { id: string; field: string };
      /**
       * When some outputs validate: those outputs and the nodes they need. The engine runs them
       * and reports the others' errors with its 200; v1 does the same, v2 refuses the workflow.
       */
      runnable?: { workflow: ApiWorkflow; outputs: string[] };
    };

const MAX_NODES = 5_000;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function isAssetRef(value: unknown): value is { __type: 'core/ASSET'; info: { id: string } } {
  return isObject(value) && value.__type === 'core/ASSET' && isObject(value.info) && typeof value.info.id === 'string';
}

export function assetRefIds(workflow: ApiWorkflow): string[] {
  const ids = new Set<string>();
  for (const node of Object.values(workflow)) for (const v of Object.values(node.inputs ?? {})) if (isAssetRef(v)) ids.add(v.info.id);
  return [...ids];
}

/** `ui` for the editor's graph format (top-level nodes and links arrays), `api` otherwise. */
export function workflowFormat(workflow: unknown): 'api' | 'ui' | 'invalid' {
  if (!isObject(workflow)) return 'invalid';
  if (Array.isArray(workflow.nodes) && Array.isArray(workflow.links)) return 'ui';
  return 'api';
}

function invalid(message: string, details: string, node?: { id: string; field: string }): ValidationOutcome {
  return { ok: false, error: { type: 'invalid_prompt', message, details }, nodeErrors: {}, ...(node ? { node } : {}) };
}

/** The id of the first node with a key or string value PostgreSQL cannot store, or null. */
function findUnstorableString(workflow: Record<string, unknown>): string | null {
  for (const [id, node] of Object.entries(workflow)) {
    const stack: unknown[] = [id, node];
    while (stack.length > 0) {
      const value = stack.pop();
      if (typeof value === 'string') {
        if (!isStorableText(value)) return id;
      } else if (Array.isArray(value)) {
        for (const item of value) stack.push(item); // not push(...value): a long array would overflow the arguments
      } else if (typeof value === 'object' && value !== null) {
        for (const [k, v] of Object.entries(value)) stack.push(k, v);
      }
    }
  }
  return null;
}

/** The choices of a list input's definition entry (`[["a","b"], {...}]`, `["COMBO", {options}]`), or null for any other. */
export function inputChoices(entry: unknown): unknown[] | null {
  const { type, choices } = inputSpec(entry);
  return type === 'COMBO' ? (choices ?? []) : null;
}

/** Input type and options from a definition entry: `["INT", {...}]`, `[["a","b"], {...}]`, `["COMBO", {options}]`. */
function inputSpec(entry: unknown): { type: string; choices: unknown[] | null; options: Record<string, unknown> } {
  const [first, second] = Array.isArray(entry) ? entry : [entry];
  const options = isObject(second) ? second : {};
  if (Array.isArray(first)) return { type: 'COMBO', choices: first, options };
  if (first === 'COMBO') return { type: 'COMBO', choices: Array.isArray(options.options) ? options.options : [], options };
  return { type: typeof first === 'string' ? first : '*', choices: null, options };
}

function typesMatch(received: string, expected: string): boolean {
  if (received === expected || received === '*' || expected === '*') return true;
  const r = new Set(received.split(',').map((t) => t.trim()));
  return expected.split(',').some((t) => r.has(t.trim()));
}

/** A link names its source by the node's id, a string: the engine looks `[4, 0]` up and fails. */
function isLink(v: unknown): v is [string, number] {
  return Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && Number.isInteger(v[1]);
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function checkLiteral(name: string, entry: unknown, value: unknown): NodeProblem | null {
  const { type, choices, options } = inputSpec(entry);
  const base = { field: name, extra_info: { input_name: name, input_config: entry, received_value: value } };
  if (type === 'COMBO') {
    if (isAssetRef(value)) return null; // a file the job brings; staged into the engine before it runs
    if (choices && !choices.some((c) => c === value)) {
      return { ...base, type: 'value_not_in_list', message: 'Value not in list', details: `${name}: '${show(value)}' not in ${JSON.stringify(choices.slice(0, 50))}` };
    }
    return null;
  }
  if (type === 'INT' || type === 'FLOAT') {
    // An integer beyond 2^53, kept whole (a seed up to 2^64 - 1): compared exactly.
    const whole = rawInteger(value);
    if (whole !== null) return checkRange(name, whole, options, base);
    const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
    if (!Number.isFinite(n) || (type === 'INT' && !Number.isInteger(n)) || typeof value === 'boolean') {
      return { ...base, type: 'invalid_input_type', message: `Failed to convert an input value to a ${type} value`, details: `${name}, ${show(value)}` };
    }
    return checkRange(name, n, options, base);
  }
  if (type === 'STRING' && typeof value !== 'string' && typeof value !== 'number' && rawInteger(value) === null && !isAssetRef(value)) {
    return { ...base, type: 'invalid_input_type', message: 'Failed to convert an input value to a STRING value', details: `${name}, ${show(value)}` };
  }
  if (type === 'BOOLEAN' && typeof value !== 'boolean') {
    return { ...base, type: 'invalid_input_type', message: 'Failed to convert an input value to a BOOLEAN value', details: `${name}, ${show(value)}` };
  }
  return null;
}

/** A bound of an input definition: a number, or an integer beyond 2^53 kept whole (a seed's 2^64 - 1). */
function bound(value: unknown): number | bigint | undefined {
  return rawInteger(value) ?? (typeof value === 'number' ? value : undefined);
}

function checkRange(name: string, n: number | bigint, options: Record<string, unknown>, base: Pick<NodeProblem, 'field' | 'extra_info'>): NodeProblem | null {
  // Numbers and BigInts compare exactly with < and >.
  const min = bound(options.min);
  const max = bound(options.max);
  if (min !== undefined && n < min) return { ...base, type: 'value_smaller_than_min', message: `Value ${n} smaller than min of ${min}`, details: name };
  if (max !== undefined && n > max) return { ...base, type: 'value_bigger_than_max', message: `Value ${n} bigger than max of ${max}`, details: name };
  return null;
}

/** The engine's definition of a node class, if it has one: a name such as `constructor` is none. */
export function nodeDefinition(defs: NodeDefinitions, classType: string): NodeDefinition | undefined {
  return Object.hasOwn(defs, classType) ? defs[classType] : undefined;
}

export function validateWorkflow(workflow: unknown, defs: NodeDefinitions): ValidationOutcome {
  if (!isObject(workflow) || Object.keys(workflow).length === 0) return invalid('Cannot execute because the prompt is empty or not an object.', '');
  const ids = Object.keys(workflow);
  if (ids.length > MAX_NODES) return invalid(`Cannot execute a prompt of more than ${MAX_NODES} nodes.`, `${ids.length} nodes`);
  const unstorable = findUnstorableString(workflow);
  if (unstorable) return invalid('Cannot execute because a string holds a NUL character or a lone UTF-16 surrogate.', `Node ID '#${unstorable}'`, { id: unstorable, field: 'inputs' });
  const outputs: string[] = [];
  for (const id of ids) {
    // Every map of this service keyed by node id would take this one for its prototype, so the
    // node would vanish (and its errors with it): refused, though the engine, in Python, takes it.
    if (id === '__proto__') return invalid('Cannot execute because a node id is reserved.', `Node ID '#${id}'`);
    const node = workflow[id];
    if (!isObject(node) || typeof node.class_type !== 'string') {
      return invalid('Cannot execute because a node is missing the class_type property.', `Node ID '#${id}'`, { id, field: 'class_type' });
    }
    if (node.inputs !== undefined && !isObject(node.inputs)) return invalid('Cannot execute because a node has inputs that are not an object.', `Node ID '#${id}'`, { id, field: 'inputs' });
    const def = nodeDefinition(defs, node.class_type);
    if (!def) return invalid(`Cannot execute because node ${node.class_type} does not exist.`, `Node ID '#${id}'`, { id, field: 'class_type' });
    if (def.output_node) outputs.push(id);
  }
  if (outputs.length === 0) return { ok: false, error: { type: 'prompt_no_outputs', message: 'Prompt has no outputs', details: '' }, nodeErrors: {} };

  const wf = workflow as ApiWorkflow;
  const problems = new Map<string, NodeProblem[]>();
  const dependents = new Map<string, Set<string>>();
  const links = new Map<string, Link[]>();
  // Only nodes an output depends on are validated (and run), as the engine does. Iterative, so
  // deep or cyclic graphs cost bounded stack and each node is checked once.
  for (const out of outputs) {
    const stack = [out];
    const seen = new Set<string>();
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (seen.has(id)) continue;
      seen.add(id);
      if (!dependents.has(id)) dependents.set(id, new Set());
      dependents.get(id)!.add(out);
      if (problems.has(id)) continue;
      const nodeLinks: Link[] = [];
      problems.set(id, checkNode(id, wf, defs, nodeLinks));
      links.set(id, nodeLinks);
      for (const link of nodeLinks) stack.push(link.source);
    }
  }
  // A graph that feeds a node its own output can never run: the engine would take the job and
  // fail it, so it is refused here with the other validation problems.
  const cycle = findCycle(links, outputs);
  if (cycle) {
    const { node, input } = cycle[0]!;
    const shown = cycle.map((c) => c.node).slice(0, 20);
    const path = cycle.length > shown.length ? `${shown.join(' -> ')} -> ... (${cycle.length} nodes)` : [...shown, node].join(' -> ');
    problems.get(node)!.push({ type: 'dependency_cycle', message: 'Dependency cycle detected', details: `${input}: ${path}`, field: input, extra_info: { input_name: input, cycle: shown } });
  }
  const nodeErrors: Record<string, { class_type: string; problems: NodeProblem[]; dependent_outputs: string[] }> = {};
  for (const [id, list] of problems) {
    if (list.length > 0) nodeErrors[id] = { class_type: wf[id]!.class_type, problems: list, dependent_outputs: [...(dependents.get(id) ?? [])] };
  }
  if (Object.keys(nodeErrors).length > 0) {
    const details = Object.values(nodeErrors).flatMap((e) => e.problems.map((p) => `${p.message}: ${p.details}`)).join('\n');
    const failed = new Set(Object.values(nodeErrors).flatMap((e) => e.dependent_outputs));
    const good = outputs.filter((o) => !failed.has(o));
    const error: WorkflowProblem = { type: 'prompt_outputs_failed_validation', message: 'Prompt outputs failed validation', details };
    return { ok: false, error, nodeErrors, ...(good.length > 0 ? { runnable: { workflow: neededBy(good, wf, links), outputs: good } } : {}) };
  }
  return { ok: true, outputs };
}

/** The nodes `outputs` need, themselves included, following the links validation found. */
function neededBy(outputs: string[], wf: ApiWorkflow, links: Map<string, Link[]>): ApiWorkflow {
  const needed: ApiWorkflow = {};
  const stack = [...outputs];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (Object.hasOwn(needed, id)) continue;
    needed[id] = wf[id]!;
    for (const link of links.get(id) ?? []) stack.push(link.source);
  }
  return needed;
}

interface Link {
  input: string;
  source: string;
}

/**
 * One cycle among the links, as the nodes along it (each with the input that leads on), or null.
 * Depth-first with an explicit stack, so a chain of thousands of nodes costs no call stack.
 */
function findCycle(links: Map<string, Link[]>, starts: string[]): Array<{ node: string; input: string }> | null {
  const state = new Map<string, 'open' | 'done'>();
  for (const start of starts) {
    if (state.has(start)) continue;
    const path: Array<{ node: string; next: number }> = [{ node: start, next: 0 }];
    state.set(start, 'open');
    while (path.length > 0) {
      const top = path[path.length - 1]!;
      const out = links.get(top.node) ?? [];
      if (top.next >= out.length) {
        state.set(top.node, 'done');
        path.pop();
        continue;
      }
      const link = out[top.next++]!;
      const seen = state.get(link.source);
      if (seen === 'open') {
        const from = path.findIndex((p) => p.node === link.source);
        return path.slice(from).map((p) => ({ node: p.node, input: (links.get(p.node) ?? [])[p.next - 1]!.input }));
      }
      if (seen === undefined) {
        state.set(link.source, 'open');
        path.push({ node: link.source, next: 0 });
      }
    }
  }
  return null;
}

/** Problems of one node; the links it makes to other nodes go onto `linked`. */
function checkNode(id: string, wf: ApiWorkflow, defs: NodeDefinitions, linked: Link[]): NodeProblem[] {
  const node = wf[id]!;
  const def = defs[node.class_type]!;
  const inputs = node.inputs ?? {};
  const required = def.input?.required ?? {};
  const optional = def.input?.optional ?? {};
  const found: NodeProblem[] = [];
  for (const name of Object.keys(required)) {
    if (!(name in inputs)) {
      found.push({ type: 'required_input_missing', message: 'Required input is missing', details: name, field: name, extra_info: { input_name: name } });
    }
  }
  for (const [name, value] of Object.entries(inputs)) {
    const entry = Object.hasOwn(required, name) ? required[name] : Object.hasOwn(optional, name) ? optional[name] : undefined;
    if (entry === undefined) continue; // the engine ignores inputs it does not declare
    if (Array.isArray(value)) {
      if (!isLink(value)) {
        found.push({
          type: 'bad_linked_input',
          message: 'Bad linked input, must be a length-2 list of [node_id, slot_index]',
          details: name,
          field: name,
          extra_info: { input_name: name, input_config: entry, received_value: value },
        });
        continue;
      }
      const source = value[0];
      const sourceNode = Object.hasOwn(wf, source) ? wf[source] : undefined;
      const sourceDef = sourceNode ? defs[sourceNode.class_type] : undefined;
      if (!sourceNode || !sourceDef) {
        found.push({ type: 'bad_linked_input', message: 'Linked node does not exist', details: `${name}: node '${source}'`, field: name, extra_info: { input_name: name, linked_node: value } });
        continue;
      }
      const outs = Array.isArray(sourceDef.output) ? sourceDef.output : [];
      if (value[1] < 0 || value[1] >= outs.length) {
        found.push({ type: 'bad_linked_input', message: 'Linked output index does not exist', details: `${name}: output ${value[1]} of node '${source}' (${sourceNode.class_type} has ${outs.length})`, field: name, extra_info: { input_name: name, linked_node: value } });
        continue;
      }
      const received = outs[value[1]];
      const expected = inputSpec(entry).type;
      const receivedType = Array.isArray(received) ? 'COMBO' : String(received);
      if (!typesMatch(receivedType, expected)) {
        found.push({
          type: 'return_type_mismatch',
          message: 'Return type mismatch between linked nodes',
          details: `${name}, received_type(${receivedType}) mismatch input_type(${expected})`,
          field: name,
          extra_info: { input_name: name, input_config: entry, received_type: receivedType, linked_node: value },
        });
        continue;
      }
      linked.push({ input: name, source });
      continue;
    }
    const problem = checkLiteral(name, entry, value);
    if (problem) found.push(problem);
  }
  return found;
}
