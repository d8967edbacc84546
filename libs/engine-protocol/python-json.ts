/**
 * JSON text the way Python's `json.dumps` writes it with default settings
 * (`", "` and `": "` separators, non-ASCII escaped as lowercase `\uXXXX`).
 * The engine serialises every HTTP answer, WebSocket text frame and binary
 * frame metadata header this way, so byte lengths match a real engine.
 */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  // An integer kept whole by a lossless parse (JSON.rawJSON): Python prints every digit too.
  if ((JSON as JSON & { isRawJSON(v: unknown): v is { rawJSON: string } }).isRawJSON(value)) return value.rawJSON;
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (Number.isNaN(value)) return 'NaN';
      if (!Number.isFinite(value)) return value > 0 ? 'Infinity' : '-Infinity';
      return String(value);
    case 'bigint':
      return value.toString();
    case 'string':
      return quote(value);
    case 'object': {
      if (Array.isArray(value)) return '[' + value.map((v) => pythonJsonDumps(v)).join(', ') + ']';
      const parts: string[] = [];
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        if (v === undefined) continue;
        parts.push(quote(k) + ': ' + pythonJsonDumps(v));
      }
      return '{' + parts.join(', ') + '}';
    }
    default:
      return 'null';
  }
}

function quote(s: string): string {
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) =>
    c === '\u007f' ? c : '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'),
  );
}
