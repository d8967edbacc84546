// JSON whose integers keep every digit. The engine's seeds range to 2^64 - 1 and Python clients send
// them as plain integers; JavaScript numbers hold 53 bits, so a plain JSON.parse would change the
// seed a tenant asked for. Integers beyond 2^53 are kept as raw JSON values (JSON.rawJSON, Node 21+):
// JSON.stringify writes them back digit for digit, and PostgreSQL's jsonb keeps them exactly.

/** A JSON value kept as its source text: `JSON.rawJSON(text)`. */
export interface RawJson {
  readonly rawJSON: string;
}

const RawJsonApi = JSON as JSON & { rawJSON(text: string): RawJson; isRawJSON(value: unknown): value is RawJson };

export function isRawJson(value: unknown): value is RawJson {
  return RawJsonApi.isRawJSON(value);
}

const WHOLE_NUMBER = /^-?\d+$/;
// Only a text with a run of this many digits can hold an integer beyond 2^53 (16 digits).
const LONG_DIGITS = /\d{16}/;

/**
 * A JSON.parse reviver that keeps integers beyond 2^53 as raw JSON values. The third argument is the
 * source text of each primitive (JSON.parse source text access, Node 21+).
 */
export function losslessReviver(_key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value === 'number' && !Number.isSafeInteger(value) && context?.source && WHOLE_NUMBER.test(context.source)) {
    return RawJsonApi.rawJSON(context.source);
  }
  return value;
}

/** Whether parsing `text` needs the lossless reviver at all (most texts hold no long integer). */
export function mayHoldLongIntegers(text: string): boolean {
  return LONG_DIGITS.test(text);
}

/** JSON.parse, with integers beyond 2^53 kept whole. */
export function parseLosslessJson(text: string): unknown {
  return mayHoldLongIntegers(text) ? JSON.parse(text, losslessReviver as (key: string, value: unknown) => unknown) : JSON.parse(text);
}

/** The integer a raw JSON value holds, or null when it holds something else. */
export function rawInteger(value: unknown): bigint | null {
  return isRawJson(value) && WHOLE_NUMBER.test(value.rawJSON) ? BigInt(value.rawJSON) : null;
}

/**
 * A deep copy of a parsed JSON value that keeps raw values as they are (structuredClone would turn
 * them into plain objects that no longer print as numbers).
 */
export function copyJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => copyJson(v)) as T;
  if (typeof value !== 'object' || value === null || isRawJson(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = copyJson(v);
  return out as T;
}
