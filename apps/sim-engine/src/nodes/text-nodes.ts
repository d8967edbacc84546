/** String nodes and the text output node of the engine (PreviewAny). */
import { pythonJsonDumps } from '#libs/engine-protocol';
import { def } from './image-nodes.js';
import type { SimNode } from './types.js';

function pyStr(v: unknown): string {
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number' && Number.isInteger(v) && typeof v !== 'bigint') return String(v);
  return String(v);
}

export const TEXT_NODES: Record<string, SimNode> = {
  PrimitiveString: { definition: () => def('PrimitiveString'), execute: (i) => ({ outputs: [String(i.value)] }) },
  PrimitiveInt: { definition: () => def('PrimitiveInt'), execute: (i) => ({ outputs: [Number(i.value)] }) },
  StringConcatenate: {
    definition: () => def('StringConcatenate'),
    execute: (i) => ({ outputs: [String(i.string_a) + String(i.delimiter) + String(i.string_b)] }),
  },
  StringLength: { definition: () => def('StringLength'), execute: (i) => ({ outputs: [[...String(i.string)].length] }) },
  PreviewAny: {
    definition: () => def('PreviewAny'),
    execute(i) {
      const s = i.source;
      let value = 'None';
      if (typeof s === 'string') value = s;
      else if (typeof s === 'number' || typeof s === 'boolean') value = pyStr(s);
      else if (s !== null && s !== undefined) {
        value = typeof s === 'object' && 'kind' in s ? `<${(s as { kind: string }).kind}>` : pythonJsonDumps(s);
      }
      return { outputs: [], ui: { text: [value] } };
    },
  },
};
