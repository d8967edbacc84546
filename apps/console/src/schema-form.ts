// A form from a router model's input schema document (a standalone OpenAPI document whose one
// POST operation takes the model's JSON input). No DOM here: the unit tests run it in Node.

type Schema = Record<string, unknown>;

export type FieldKind = 'text' | 'textarea' | 'select' | 'integer' | 'number' | 'boolean' | 'json';

export interface Field {
  name: string;
  kind: FieldKind;
  required: boolean;
  description: string | null;
  options: string[];
  min: number | null;
  max: number | null;
  step: number | null;
  /** What the control starts with, as its text ('' for nothing). */
  initial: string;
}

/** Follows local `$ref`s (`#/components/schemas/X`) within the document. */
function deref(doc: Schema, schema: unknown, depth = 0): Schema {
  const s = (schema ?? {}) as Schema;
  const ref = s.$ref;
  if (typeof ref !== 'string' || !ref.startsWith('#/') || depth > 16) return s;
  let node: unknown = doc;
  for (const part of ref.slice(2).split('/')) node = (node as Schema | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  return deref(doc, node, depth + 1);
}

/** The JSON body schema of the document's (first) POST operation, dereferenced. */
export function inputSchemaOf(doc: Schema): Schema | null {
  for (const item of Object.values((doc.paths ?? {}) as Record<string, Schema>)) {
    const post = item?.post as Schema | undefined;
    const content = ((post?.requestBody as Schema | undefined)?.content ?? {}) as Record<string, Schema>;
    const json = content['application/json'];
    if (json?.schema) return deref(doc, json.schema);
  }
  return null;
}

function kindOf(s: Schema): FieldKind {
  if (Array.isArray(s.enum) && s.enum.every((v) => typeof v === 'string')) return 'select';
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (type === 'string') return typeof s.maxLength === 'number' && s.maxLength <= 200 ? 'text' : 'textarea';
  if (type === 'integer') return 'integer';
  if (type === 'number') return 'number';
  if (type === 'boolean') return 'boolean';
  return 'json';
}

/** One control per top-level property; anything nested is edited as JSON. */
export function fieldsOf(doc: Schema): Field[] {
  const schema = inputSchemaOf(doc);
  if (!schema) return [];
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  return Object.entries((schema.properties ?? {}) as Record<string, unknown>).map(([name, raw]) => {
    const s = deref(doc, raw);
    const kind = kindOf(s);
    const num = (v: unknown) => (typeof v === 'number' ? v : null);
    const initial = s.default === undefined ? '' : kind === 'json' ? JSON.stringify(s.default) : String(s.default);
    return {
      name,
      kind,
      required: required.has(name),
      description: typeof s.description === 'string' ? s.description : null,
      options: kind === 'select' ? (s.enum as string[]) : [],
      min: num(s.minimum),
      max: num(s.maximum),
      step: num(s.multipleOf) ?? (kind === 'integer' ? 1 : null),
      initial,
    };
  });
}

/**
 * The model input from the form's values: numbers as numbers, JSON parsed, empty optional fields
 * left out (the model's default applies). Problems are per field; the service checks the rest.
 */
export function inputFrom(fields: Field[], values: Record<string, string | boolean>): { input: Record<string, unknown>; problems: Record<string, string> } {
  const input: Record<string, unknown> = {};
  const problems: Record<string, string> = {};
  for (const f of fields) {
    const v = values[f.name];
    if (f.kind === 'boolean') {
      if (v !== undefined) input[f.name] = v === true;
      continue;
    }
    const text = typeof v === 'string' ? v : '';
    if (text.trim() === '') {
      if (f.required) problems[f.name] = 'Required.';
      continue;
    }
    if (f.kind === 'integer' || f.kind === 'number') {
      const n = Number(text);
      if (!Number.isFinite(n) || (f.kind === 'integer' && !Number.isInteger(n))) problems[f.name] = f.kind === 'integer' ? 'A whole number.' : 'A number.';
      else input[f.name] = n;
    } else if (f.kind === 'json') {
      try {
        input[f.name] = JSON.parse(text);
      } catch {
        problems[f.name] = 'Not valid JSON.';
      }
    } else {
      input[f.name] = text;
    }
  }
  return { input, problems };
}
