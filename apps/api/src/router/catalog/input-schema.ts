import { createHash } from 'node:crypto';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidationEntry } from '../errors.js';

// A model's input schema is a standalone OpenAPI 3.1 document: the one callers download and the
// one calls are validated against. Its request body schema is plain JSON Schema 2020-12; refs
// point into the document's own components.

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

// Validation never changes the body: no defaults, no coercion, no removal of extra fields.
const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true, useDefaults: false, coerceTypes: false, removeAdditional: false }));

export class SchemaDocumentError extends Error {}

export interface InputSchema {
  text: string;
  etag: string;
  validate: (body: unknown) => ValidationEntry[];
  /** The media types the document declares for the call's 200 result, lowercase; empty when it declares none. */
  resultTypes: string[];
}

export function strongEtag(bytes: string | Buffer): string {
  return `"${createHash('sha256').update(bytes).digest('base64url')}"`;
}

/** Compiles the document's POST body schema for `callPath` (e.g. `/v1/models/acme/x`). */
export function compileInputSchema(text: string, callPath: string): InputSchema {
  let doc: {
    openapi?: unknown;
    paths?: Record<string, { post?: { requestBody?: { content?: Record<string, { schema?: unknown }> }; responses?: Record<string, { content?: unknown }> } }>;
    components?: unknown;
  };
  try {
    doc = JSON.parse(text) as typeof doc;
  } catch (err) {
    throw new SchemaDocumentError(`not JSON: ${(err as Error).message}`);
  }
  if (typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.1')) throw new SchemaDocumentError('must be an OpenAPI 3.1 document');
  const body = doc.paths?.[callPath]?.post?.requestBody?.content?.['application/json']?.schema;
  if (!body || typeof body !== 'object') throw new SchemaDocumentError(`must describe the application/json body of POST ${callPath}`);
  let compiled: ValidateFunction;
  try {
    compiled = ajv.compile({ ...(body as object), components: doc.components ?? {} });
  } catch (err) {
    throw new SchemaDocumentError(`the body schema does not compile: ${(err as Error).message}`);
  }
  const result = doc.paths?.[callPath]?.post?.responses?.['200']?.content;
  return {
    text,
    etag: strongEtag(text),
    validate: (value) => (compiled(value) ? [] : toEntries(compiled.errors ?? [], value)),
    resultTypes: result && typeof result === 'object' ? Object.keys(result).map((type) => type.toLowerCase()) : [],
  };
}

function valueAt(root: unknown, path: (string | number)[]): unknown {
  let current = root;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}

/** JSON pointer to a location, numbers where the container is an array. */
function locOf(root: unknown, pointer: string): (string | number)[] {
  const loc: (string | number)[] = [];
  if (pointer === '') return loc;
  let current = root;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(current)) {
      loc.push(Number(key));
      current = current[Number(key)];
    } else {
      loc.push(key);
      current = current !== null && typeof current === 'object' ? (current as Record<string, unknown>)[key] : undefined;
    }
  }
  return loc;
}

const TYPE_NAMES: Record<string, [string, string]> = {
  string: ['string_type', 'Input should be a valid string'],
  integer: ['int_type', 'Input should be a valid integer'],
  number: ['float_type', 'Input should be a valid number'],
  boolean: ['bool_type', 'Input should be a valid boolean'],
  array: ['list_type', 'Input should be a valid list'],
  object: ['dict_type', 'Input should be a valid dictionary'],
  null: ['none_required', 'Input should be None'],
};

function quoteList(values: unknown[]): string {
  const quoted = values.map((v) => (typeof v === 'string' ? `'${v}'` : JSON.stringify(v)));
  return quoted.length <= 1 ? (quoted[0] ?? '') : `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}

/** Ajv's errors in the validation vocabulary partners use (loc, msg, type, ctx, input). */
function toEntries(errors: ErrorObject[], body: unknown): ValidationEntry[] {
  // A failed anyOf/oneOf reports every branch; the caller needs one entry for the field.
  const combinators = errors.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf').map((e) => `${e.schemaPath}/`);
  const entries: ValidationEntry[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    if (combinators.some((prefix) => e.schemaPath.startsWith(prefix))) continue;
    const path = locOf(body, e.instancePath);
    const input = valueAt(body, path);
    const p = e.params as Record<string, unknown>;
    let entry: ValidationEntry;
    switch (e.keyword) {
      case 'required': {
        entry = { loc: [...path, String(p.missingProperty)], msg: 'Field required', type: 'missing', input };
        break;
      }
      case 'additionalProperties': {
        const extra = String(p.additionalProperty);
        entry = { loc: [...path, extra], msg: 'Extra inputs are not permitted', type: 'extra_forbidden', input: valueAt(input, [extra]) };
        break;
      }
      case 'type': {
        const wanted = String(Array.isArray(p.type) ? p.type[0] : p.type);
        const [type, msg] = TYPE_NAMES[wanted] ?? ['type_error', `Input should be of type ${wanted}`];
        entry = { loc: path, msg, type, input };
        break;
      }
      case 'minimum':
        entry = { loc: path, msg: `Input should be greater than or equal to ${String(p.limit)}`, type: 'greater_than_equal', ctx: { ge: p.limit }, input };
        break;
      case 'exclusiveMinimum':
        entry = { loc: path, msg: `Input should be greater than ${String(p.limit)}`, type: 'greater_than', ctx: { gt: p.limit }, input };
        break;
      case 'maximum':
        entry = { loc: path, msg: `Input should be less than or equal to ${String(p.limit)}`, type: 'less_than_equal', ctx: { le: p.limit }, input };
        break;
      case 'exclusiveMaximum':
        entry = { loc: path, msg: `Input should be less than ${String(p.limit)}`, type: 'less_than', ctx: { lt: p.limit }, input };
        break;
      case 'minLength':
        entry = { loc: path, msg: `String should have at least ${String(p.limit)} characters`, type: 'string_too_short', ctx: { min_length: p.limit }, input };
        break;
      case 'maxLength':
        entry = { loc: path, msg: `String should have at most ${String(p.limit)} characters`, type: 'string_too_long', ctx: { max_length: p.limit }, input };
        break;
      case 'minItems':
        entry = { loc: path, msg: `List should have at least ${String(p.limit)} items`, type: 'too_short', ctx: { field_type: 'List', min_length: p.limit, actual_length: Array.isArray(input) ? input.length : null }, input };
        break;
      case 'maxItems':
        entry = { loc: path, msg: `List should have at most ${String(p.limit)} items`, type: 'too_long', ctx: { field_type: 'List', max_length: p.limit, actual_length: Array.isArray(input) ? input.length : null }, input };
        break;
      case 'pattern':
        entry = { loc: path, msg: `String should match pattern '${String(p.pattern)}'`, type: 'string_pattern_mismatch', ctx: { pattern: p.pattern }, input };
        break;
      case 'enum': {
        const expected = quoteList((p.allowedValues as unknown[]) ?? []);
        entry = { loc: path, msg: `Input should be ${expected}`, type: 'enum', ctx: { expected }, input };
        break;
      }
      case 'const': {
        const expected = quoteList([p.allowedValue]);
        entry = { loc: path, msg: `Input should be ${expected}`, type: 'literal_error', ctx: { expected }, input };
        break;
      }
      case 'format':
        entry = { loc: path, msg: `Input should be a valid ${String(p.format)}`, type: 'value_error', ctx: { format: p.format }, input };
        break;
      case 'multipleOf':
        entry = { loc: path, msg: `Input should be a multiple of ${String(p.multipleOf)}`, type: 'multiple_of', ctx: { multiple_of: p.multipleOf }, input };
        break;
      case 'anyOf':
      case 'oneOf':
        entry = { loc: path, msg: 'Input does not match any of the allowed forms', type: 'value_error', input };
        break;
      default:
        entry = { loc: path, msg: e.message ?? 'Input is not valid', type: 'value_error', input };
    }
    entry.loc = ['body', ...entry.loc];
    if (entry.input === undefined) delete entry.input;
    const dedupe = `${JSON.stringify(entry.loc)}|${entry.type}`;
    if (seen.has(dedupe)) continue;
    seen.add(dedupe);
    entries.push(entry);
  }
  return entries;
}
