import { rawInteger } from '#libs/contracts';
/** Python behaviours the engine's validation exposes in its messages (conversions, repr, str). */

/** An exception as the engine reports it: type name, str(ex) and traceback lines. */
export class PyException extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly traceback: string[] = [],
  ) {
    super(message);
    this.name = type;
  }
}

export function pyReprString(s: string): string {
  const useDouble = s.includes("'") && !s.includes('"');
  const q = useDouble ? '"' : "'";
  let out = '';
  for (const ch of s) {
    if (ch === '\\') out += '\\\\';
    else if (ch === q) out += '\\' + q;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f) out += '\\x' + ch.charCodeAt(0).toString(16).padStart(2, '0');
    else out += ch;
  }
  return q + out + q;
}

export function pyFloatStr(n: number): string {
  if (Number.isNaN(n)) return 'nan';
  if (!Number.isFinite(n)) return n > 0 ? 'inf' : '-inf';
  if (Number.isInteger(n) && Math.abs(n) < 1e16) return n.toFixed(1);
  return String(n).replace(/e\+?/, (m) => (m === 'e+' ? 'e+' : 'e'));
}

export function pyNumStr(n: number | bigint, asFloat = false): string {
  if (typeof n === 'bigint') return n.toString();
  return asFloat ? pyFloatStr(n) : Number.isInteger(n) ? String(n) : pyFloatStr(n);
}

export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number' || typeof v === 'bigint') return pyNumStr(v);
  if (typeof v === 'string') return pyReprString(v);
  if (Array.isArray(v)) return '[' + v.map(pyRepr).join(', ') + ']';
  if (typeof v === 'object') {
    return '{' + Object.entries(v as Record<string, unknown>).map(([k, x]) => `${pyReprString(k)}: ${pyRepr(x)}`).join(', ') + '}';
  }
  return String(v);
}

/** str(v) */
export function pyStr(v: unknown): string {
  return typeof v === 'string' ? v : pyRepr(v);
}

export function pyTypeName(v: unknown): string {
  if (v === null || v === undefined) return 'NoneType';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float';
  if (typeof v === 'string') return 'str';
  if (Array.isArray(v)) return 'list';
  return 'dict';
}

/** int(v) */
export function pyInt(v: unknown): number | bigint {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'bigint') return v;
  // An integer beyond 2^53, kept whole by the lossless parse: Python's int holds any size.
  const whole = rawInteger(v);
  if (whole !== null) return whole;
  if (typeof v === 'number') {
    if (Number.isNaN(v)) throw new PyException('ValueError', 'cannot convert float NaN to integer');
    if (!Number.isFinite(v)) throw new PyException('OverflowError', 'cannot convert float infinity to integer');
    return Math.trunc(v);
  }
  if (typeof v === 'string') {
    const t = v.trim();
    if (/^[+-]?\d+(_\d+)*$/.test(t)) return Number(t.replace(/_/g, ''));
    throw new PyException('ValueError', `invalid literal for int() with base 10: ${pyReprString(v)}`);
  }
  throw new PyException('TypeError', `int() argument must be a string, a bytes-like object or a real number, not '${pyTypeName(v)}'`);
}

/** float(v) */
export function pyFloat(v: unknown): number {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') {
    const t = v.trim().replace(/(\d)_(?=\d)/g, '$1');
    if (/^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)$/.test(t)) return Number(t);
    if (/^[+-]?(inf|infinity)$/i.test(t)) return t.startsWith('-') ? -Infinity : Infinity;
    if (/^[+-]?nan$/i.test(t)) return NaN;
    throw new PyException('ValueError', `could not convert string to float: ${pyReprString(v)}`);
  }
  throw new PyException('TypeError', `float() argument must be a string or a real number, not '${pyTypeName(v)}'`);
}

/** bool(v) */
export function pyBool(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** Python `==` for the scalar types a combo holds (1 == 1.0 == True). */
export function pyEquals(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  const num = (x: unknown): number | undefined => (typeof x === 'number' ? x : typeof x === 'boolean' ? Number(x) : undefined);
  const na = num(a);
  const nb = num(b);
  return na !== undefined && nb !== undefined && na === nb;
}
