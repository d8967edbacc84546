import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// Every answer of our API a suite sees through the helpers of http.ts is checked against the
// OpenAPI document (openapi/openapi.json, which openapi.e2e.test.ts proves equal to the served
// one): its path must be an operation, its status declared, the headers the document requires
// present, and a JSON body must match the declared schema. Violations are kept and fail the suite
// (contract-setup.ts, an afterAll of every e2e suite), so each suite proves the answers it causes.

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const DOC_PATH = fileURLToPath(new URL('../../openapi/openapi.json', import.meta.url));

type Json = Record<string, any>;

interface Template {
  method: string;
  path: string;
  pattern: RegExp;
  op: Json;
}

let loaded: { doc: Json; ajv: Ajv2020; templates: Template[]; validators: Map<string, ValidateFunction> } | null = null;

function load() {
  if (loaded) return loaded;
  const doc = JSON.parse(readFileSync(DOC_PATH, 'utf8')) as Json;
  // OpenAPI keywords next to the schemas (`examples` as a map) are not JSON Schema: not strict.
  const ajv = addFormats(new Ajv2020({ strict: false, allErrors: false, validateFormats: true }));
  ajv.addSchema(doc, 'openapi.json');
  const templates: Template[] = [];
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      // `/api/...` v1 routes are also served without `/api` (the engine's unprefixed twins).
      const body = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\{\w+\\\}/g, '[^/]+');
      const twin = path.startsWith('/api/') && !path.startsWith('/api/v2/') && op.tags?.[0] === 'v1' ? `(?:/api)?${body.slice('/api'.length)}` : body;
      // A mount prefix (BASE_PATH, one segment in the suites) and a deployment's prefix may come first.
      templates.push({ method: method.toUpperCase(), path, pattern: new RegExp(`^((?:/[^/]+)?(?:/deployment/[^/]+)?)${twin}$`), op });
    }
  }
  // The most specific template first: `/api/v2/jobs/{id}/events` before `/api/v2/jobs/{id}`.
  templates.sort((a, b) => b.path.length - a.path.length);
  loaded = { doc, ajv, templates, validators: new Map() };
  return loaded;
}

const ROUTING_MISS = JSON.stringify({ error: { code: 'not_found', message: 'Not found.' } });

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

export interface Answer {
  method: string;
  url: string;
  status: number;
  headers: Headers;
  /** The parsed JSON body, when the answer was JSON. */
  json?: unknown;
  contentType: string;
  hasBody: boolean;
}

export interface Checked {
  operation: string | null;
  problem: string | null;
}

/** Checks one answer of our API against the document; `operation` is null for a path it does not list. */
export function checkAnswer(answer: Answer): Checked {
  const { ajv, templates, validators } = load();
  const path = new URL(answer.url).pathname;
  const method = answer.method.toUpperCase();
  // The template that leaves the shortest prefix (`/v1/models` is the router's, not the engine's
  // `/models` under a mount called `/v1`), then the most specific one. Fastify answers HEAD for every GET route.
  const prefix = (t: Template) => t.pattern.exec(path)?.[1]?.length ?? -1;
  const candidates = templates.filter((t) => prefix(t) >= 0).sort((a, b) => prefix(a) - prefix(b));
  const template = candidates.find((t) => t.method === method) ?? (method === 'HEAD' ? candidates.find((t) => t.method === 'GET') : undefined);
  if (!template) return { operation: null, problem: null };
  const operation = `${template.method} ${template.path}`;
  const where = `${answer.method} ${path} → ${answer.status} (${operation})`;
  const response = template.op.responses[String(answer.status)] as Json | undefined;
  // The routing 404 of a path outside the API's mount that happens to end like an operation.
  const declaresJson = Object.keys(response?.content ?? {}).some((t) => t.includes('json'));
  if (answer.status === 404 && !declaresJson && JSON.stringify(answer.json) === ROUTING_MISS) return { operation: null, problem: null };
  if (!response) return { operation, problem: `${where}: status ${answer.status} is not declared` };
  for (const [name, header] of Object.entries((response.headers ?? {}) as Json)) {
    if (header.required && !answer.headers.has(name)) return { operation, problem: `${where}: required header ${name} is missing` };
  }
  if (answer.json === undefined || method === 'HEAD') return { operation, problem: null };
  const content = (response.content ?? {}) as Json;
  const type = Object.keys(content).find((t) => t === 'application/json' || t === '*/*') ?? Object.keys(content).find((t) => t.includes('json'));
  if (!type) return { operation, problem: `${where}: a JSON body is not declared (${answer.contentType})` };
  if (!content[type].schema) return { operation, problem: null };
  const ref = `openapi.json#/${pointer('paths', template.path, template.method.toLowerCase(), 'responses', String(answer.status), 'content', type, 'schema')}`;
  let validate = validators.get(ref);
  if (!validate) {
    validate = ajv.compile({ $ref: ref });
    validators.set(ref, validate);
  }
  if (validate(answer.json)) return { operation, problem: null };
  const first = validate.errors?.[0];
  return { operation, problem: `${where}: body does not match: ${first?.instancePath || '/'} ${first?.message ?? ''} (${JSON.stringify(answer.json).slice(0, 300)})` };
}

const problems: string[] = [];
const exercised = new Set<string>();

/** Records one answer (call() and the raw helpers); answers of other servers are left alone. */
export function recordAnswer(answer: Answer): void {
  if (process.env.CONTRACT_CHECK === '0') return;
  // Every answer of our API carries X-Request-Id; the engine, the partner simulator and S3 do not.
  if (!answer.headers.has('x-request-id')) return;
  const { operation, problem } = checkAnswer(answer);
  if (operation) exercised.add(operation);
  if (problem) problems.push(problem);
}

/** What this suite's answers broke, once each, and forgets them. */
export function takeContractProblems(): string[] {
  const out = [...new Set(problems)];
  problems.length = 0;
  return out;
}

/** The operations (`GET /api/v2/jobs/{id}`) this suite's answers exercised. */
export function exercisedOperations(): Set<string> {
  return exercised;
}

/** Every operation of the document. */
export function documentedOperations(): string[] {
  return load().templates.map((t) => `${t.method} ${t.path}`);
}
