import { parseTree, type Node } from 'jsonc-parser';

// Result media URLs are replaced inside the provider's JSON text itself: every other byte of the
// body (key order, number formatting, spacing) stays as the provider wrote it.

export interface StringAt {
  /** Offset and length of the string token, quotes included, in the text. */
  offset: number;
  length: number;
  value: string;
}

/**
 * Whether the JSON text can hold an http(s) URL in some string: `://` as written, or with its
 * slashes escaped (`:\/\/`, as some encoders write them), or any `\u` escape, which could spell
 * either. Most answers carry their media inline (base64) or none, and are then not parsed at all.
 */
export function mayHoldUrl(text: string): boolean {
  return text.includes('://') || text.includes(':\\/\\/') || text.includes('\\u');
}

/** The string values at `paths` (keys from the root; `*` for every element or member). */
export function stringsAt(text: string, paths: readonly (readonly string[])[]): StringAt[] {
  const root = parseTree(text);
  if (!root) return [];
  const found: StringAt[] = [];
  for (const path of paths) walk(root, path, 0, found);
  return found;
}

function walk(node: Node, path: readonly string[], at: number, found: StringAt[]): void {
  if (at === path.length) {
    if (node.type === 'string' && typeof node.value === 'string') found.push({ offset: node.offset, length: node.length, value: node.value });
    return;
  }
  const key = path[at]!;
  if (node.type === 'array') {
    const items = node.children ?? [];
    for (const [i, item] of items.entries()) if (key === '*' || key === String(i)) walk(item, path, at + 1, found);
  } else if (node.type === 'object') {
    for (const property of node.children ?? []) {
      const [name, value] = property.children ?? [];
      if (name && value && (key === '*' || name.value === key)) walk(value, path, at + 1, found);
    }
  }
}

/** The text with each string token replaced by the JSON string of its new value. */
export function replaceStrings(text: string, edits: { at: StringAt; value: string }[]): string {
  let out = text;
  for (const { at, value } of [...edits].sort((a, b) => b.at.offset - a.at.offset)) {
    out = out.slice(0, at.offset) + JSON.stringify(value) + out.slice(at.offset + at.length);
  }
  return out;
}
