// Which inputs of the engine's node definitions name a file the user supplies, and what the
// definitions look like once those lists hold one account's files instead of the engine's folder.
//
// The engine lists its own input (or output) folder in these inputs. That folder holds whatever any
// tenant's job staged there, so no tenant may see or name its contents: each tenant gets its own
// files instead, on both surfaces, in `object_info` and in validation alike.

import type { NodeDefinition, NodeDefinitions } from '#libs/workflow';

/** What kind of file an upload input takes, from the engine's flags on it. */
export type FileKind = 'image' | 'audio' | 'video' | 'output-image' | 'any';

const UPLOAD_FLAGS: Array<[flag: string, kind: FileKind]> = [
  ['image_upload', 'image'],
  ['audio_upload', 'audio'],
  ['video_upload', 'video'],
  ['upload', 'any'],
];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function flagged(options: Record<string, unknown>, flag: string): boolean {
  return options[flag] !== undefined && options[flag] !== false && options[flag] !== null;
}

/**
 * The kind of file an input definition entry takes when the user supplies it (an upload widget in
 * the engine's front end), or null for any other input. `image_folder: "output"` lists the
 * engine's outputs (LoadImageOutput): the account's own outputs stand there.
 */
export function fileKind(entry: unknown): FileKind | null {
  if (!Array.isArray(entry)) return null;
  const options = isObject(entry[1]) ? entry[1] : {};
  if (options.image_folder === 'output') return 'output-image';
  for (const [flag, kind] of UPLOAD_FLAGS) if (flagged(options, flag)) return kind;
  if (flagged(options, 'image_folder')) return 'image';
  return null;
}

/** Whether the entry is a list input (`[[...choices], {...}]` or `["COMBO", {options}]`). */
export function isListInput(entry: unknown): boolean {
  return Array.isArray(entry) && (Array.isArray(entry[0]) || entry[0] === 'COMBO');
}

function withChoices(entry: unknown[], names: string[]): unknown[] {
  const options = isObject(entry[1]) ? entry[1] : {};
  if (entry[0] === 'COMBO') return ['COMBO', { ...options, options: names }, ...entry.slice(2)];
  return [names, ...entry.slice(1)];
}

/** The definition entry of a node's input, required or optional; undefined for an undeclared one. */
export function inputEntry(def: NodeDefinition | undefined, name: string): unknown {
  const required = def?.input?.required;
  const optional = def?.input?.optional;
  if (isObject(required) && Object.hasOwn(required, name)) return required[name];
  if (isObject(optional) && Object.hasOwn(optional, name)) return optional[name];
  return undefined;
}

/**
 * The definitions with every file input's choices replaced by `choices(kind)`. Classes without
 * file inputs are shared with `defs`, not copied.
 */
export function withFileChoices(defs: NodeDefinitions, choices: (kind: FileKind) => string[]): NodeDefinitions {
  const out: NodeDefinitions = { ...defs };
  for (const [cls, def] of Object.entries(defs)) {
    let input: NonNullable<NodeDefinition['input']> | null = null;
    for (const section of ['required', 'optional'] as const) {
      const inputs = def.input?.[section];
      if (!isObject(inputs) || !Object.values(inputs).some((e) => fileKind(e) !== null)) continue;
      const replaced: Record<string, unknown> = {};
      for (const [name, entry] of Object.entries(inputs)) {
        const kind = fileKind(entry);
        replaced[name] = kind ? withChoices(entry as unknown[], choices(kind)) : entry;
      }
      input = { ...(input ?? def.input), [section]: replaced };
    }
    if (input) out[cls] = { ...def, input };
  }
  return out;
}

const emptied = new WeakMap<NodeDefinitions, NodeDefinitions>();

/**
 * The definitions with every file list empty: a workflow whose file names were all resolved to
 * the account's assets validates against these, and any name left over fails as not in the list.
 * Made once per set of definitions (they change only when an engine reports new ones).
 */
export function withoutFileChoices(defs: NodeDefinitions): NodeDefinitions {
  let out = emptied.get(defs);
  if (!out) {
    out = withFileChoices(defs, () => []);
    emptied.set(defs, out);
  }
  return out;
}

/** Every `(node, input, value)` where a workflow puts a string into a file input or list input. */
export function fileValues(workflow: unknown, defs: NodeDefinitions): Array<{ nodeId: string; input: string; value: string; kind: FileKind | null }> {
  const found: Array<{ nodeId: string; input: string; value: string; kind: FileKind | null }> = [];
  if (!isObject(workflow)) return found;
  for (const [nodeId, node] of Object.entries(workflow)) {
    if (!isObject(node) || typeof node.class_type !== 'string' || !isObject(node.inputs)) continue;
    const def = Object.hasOwn(defs, node.class_type) ? defs[node.class_type] : undefined;
    if (!def) continue;
    for (const [input, value] of Object.entries(node.inputs)) {
      if (typeof value !== 'string') continue;
      const entry = inputEntry(def, input);
      const kind = fileKind(entry);
      if (kind || isListInput(entry)) found.push({ nodeId, input, value, kind });
    }
  }
  return found;
}
