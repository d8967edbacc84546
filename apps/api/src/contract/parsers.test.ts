import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { z } from 'zod';
import * as contracts from '#libs/contracts';
import {
  AssetUploadFieldsSchema, AssetUploadSchema, ByteRangeSchema, CancelAfterSchema, IdempotencyKeySchema, LastEventIdSchema, PreferWaitSchema, RouterIdempotencyKeySchema,
  RouterIfNoneMatchSchema, V1HistoryQuerySchema, V1LogsSubscribeRequestSchema, V1MaskUploadFieldsSchema, V1MaskUploadSchema, V1SettingsSchema,
  V1UploadFieldsSchema, V1UploadSchema, V1UserDataListQuerySchema, V1UserDataTreeQuerySchema, V1UserDataWriteQuerySchema, V1ViewMetadataQuerySchema, V1ViewQuerySchema,
} from '#libs/contracts';
import { OPERATIONS } from './index.js';

// One declaration per input: the schema an operation declares is the one its handler parses with.

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function operation(method: string, path: string) {
  const found = OPERATIONS.find((o) => o.method === method && o.path === path);
  if (!found) throw new Error(`no operation ${method} ${path}`);
  return found;
}

describe('the operation tables declare the schemas the handlers parse with', () => {
  it.each([
    ['get', '/api/history', V1HistoryQuerySchema],
    ['get', '/api/view', V1ViewQuerySchema],
    ['get', '/api/view_metadata/{folder}', V1ViewMetadataQuerySchema],
    ['get', '/api/userdata', V1UserDataListQuerySchema],
    ['get', '/api/v2/userdata', V1UserDataTreeQuerySchema],
    ['post', '/api/userdata/{file}', V1UserDataWriteQuerySchema],
    ['post', '/api/userdata/{file}/move/{dest}', V1UserDataWriteQuerySchema],
  ] as const)('%s %s: its query', (method, path, schema) => {
    expect(operation(method, path).query).toBe(schema);
  });

  it.each([
    ['patch', '/api/internal/logs/subscribe', V1LogsSubscribeRequestSchema],
    ['post', '/api/settings', V1SettingsSchema],
  ] as const)('%s %s: its JSON body', (method, path, schema) => {
    expect(operation(method, path).body?.content['application/json']).toBe(schema);
  });

  it.each([
    ['post', '/api/v2/jobs', 'Idempotency-Key', IdempotencyKeySchema],
    ['post', '/api/v2/jobs', 'Prefer', PreferWaitSchema],
    ['post', '/api/v2/jobs', 'Cancel-After', CancelAfterSchema],
    ['get', '/api/v2/jobs/{id}/events', 'Last-Event-ID', LastEventIdSchema],
    ['post', '/api/v2/assets', 'Idempotency-Key', IdempotencyKeySchema],
    ['post', '/api/v2/assets/from-url', 'Idempotency-Key', IdempotencyKeySchema],
    ['get', '/api/v2/assets/{id}/content', 'Range', ByteRangeSchema],
    ['post', '/v1/models/{provider}/{model}', 'Idempotency-Key', RouterIdempotencyKeySchema],
    ['get', '/v1/models/{provider}/{model}/openapi.json', 'If-None-Match', RouterIfNoneMatchSchema],
  ] as const)('%s %s: its %s header', (method, path, header, schema) => {
    expect(operation(method, path).headers?.[header]?.schema).toBe(schema);
  });

  it('declares no request header our code reads that the check above leaves out', () => {
    const checked = new Set(['Idempotency-Key', 'Prefer', 'Cancel-After', 'Last-Event-ID', 'Range', 'If-None-Match']);
    const declared = new Set(OPERATIONS.flatMap((o) => Object.keys(o.headers ?? {})));
    expect([...declared].filter((h) => !checked.has(h) && !Object.hasOwn(READ_BY_LIBRARIES, h))).toEqual([]);
  });

  // The multipart body is the file part plus the fields schema the handler parses the text fields with.
  it.each([
    ['/api/upload/image', V1UploadSchema, V1UploadFieldsSchema, 'image'],
    ['/api/upload/mask', V1MaskUploadSchema, V1MaskUploadFieldsSchema, 'image'],
    ['/api/v2/assets', AssetUploadSchema, AssetUploadFieldsSchema, 'file'],
  ] as const)('post %s: its multipart fields', (path, body, fields, filePart) => {
    expect(operation('post', path).body?.content['multipart/form-data']).toBe(body);
    const shape = (body as z.ZodObject).shape;
    expect(Object.keys(shape).sort()).toEqual([filePart, ...Object.keys(fields.shape)].sort());
    for (const [name, schema] of Object.entries(fields.shape)) expect([name, shape[name]]).toEqual([name, schema]);
  });
});

/**
 * Calls that parse with a declared schema in another file (a list's query, a service's body):
 * each is checked below to be defined in its file, which parses with parseWith or parseV2Input.
 */
const DELEGATES: Record<string, string> = {
  'parseDeleteBody(': 'v1/prompts.controller.ts',
  'parseInterruptBody(': 'v1/prompts.controller.ts',
  'parseQuery(': 'v1/userdata/userdata.controller.ts',
  'parseFields(': 'v1/uploads.controller.ts',
  'parseJobListQuery(': 'v2/jobs/job-list.ts',
  'parseSubmitBody(': 'v2/jobs/submit-body.ts',
  'this.list.parse(': 'v2/assets/asset-list.ts',
  'this.imports.import(': 'v2/assets/url-import.ts',
  'this.assets.fromHash(': 'v2/assets/assets.service.ts',
  'this.view.render(': 'v2/account/account-view.ts',
  'this.webhooks.parsePage(': 'webhooks/webhooks.service.ts',
  'this.webhooks.parseDeliveryPage(': 'webhooks/webhooks.service.ts',
  'parseEndpointInput(': 'webhooks/endpoint-body.ts',
  'parseEndpointPatch(': 'webhooks/endpoint-body.ts',
  'parsePromptBody(': 'v1/prompt-body.ts',
};

/** Documented request headers our code never reads: a library parses them. */
const READ_BY_LIBRARIES: Record<string, string> = {
  'Tus-Resumable': '@tus/server (resumable uploads)',
  'Upload-Length': '@tus/server',
  'Upload-Offset': '@tus/server',
  'Upload-Metadata': '@tus/server decodes it; the values are judged in v2/uploads/resumable-uploads.service.ts',
};

/**
 * Reads of a documented request header that are not its parse, each with where it is parsed (a
 * file and the call that parses it) or, without one, why the read parses nothing.
 */
const HEADER_READS: Record<string, { parsedIn: string; call: string } | { why: string }> = {
  'router/router.controller.ts idempotency-key': {
    parsedIn: 'router/calls/calls.service.ts',
    // Once the model and the body are judged: the router's order of refusals.
    call: 'parseWith(RouterIdempotencyKeySchema, input.idempotencyKeyHeader,',
  },
  'v1/userdata/userdata.controller.ts if-none-match': {
    why: "v1 GET /api/userdata/{file} keeps the engine's own conditional read (the ETag compared as sent); its operation declares no header, and nothing is refused",
  },
  'http/overload.ts prefer': { why: 'load shedding only asks, before routing, whether a request may wait by design; it refuses nothing, and the handler parses Prefer' },
};

/** Handlers that take a raw input no schema parses, each with the reason. */
const UNPARSED: Record<string, string> = {
  'blobs/blobs.controller.ts get': 'the signed URL query is judged whole by its signature (verifyBlobUrl); any other shape is the same 403',
  'v1/userdata/settings.controller.ts addUser': 'every body is refused: users are accounts here; the route only answers the engine\'s 400',
  'v1/userdata/settings.controller.ts storeSetting': 'the body is any JSON value, stored as sent (declared as such)',
};

const INPUT = /@(?:Query|Body|Headers)\(|\b(?:lastValues|readMultipartUpload)\(/;
const ROUTE = /^\s*@(?:Get|Post|Put|Patch|Delete|Head|Options|All)\(/;
/** parseWith, and v2's helper over it (checked below to call it). */
const PARSES = /\b(?:parseWith|parseV2Input)\(/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const full = path.join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(full);
    return d.name.endsWith('.ts') && !d.name.endsWith('.test.ts') ? [full] : [];
  });
}

/** Each route of a controller with its method name and text (up to the next route decorator). */
function routesOf(text: string): { method: string; text: string }[] {
  const lines = text.split('\n');
  const starts = lines.flatMap((line, i) => (ROUTE.test(line) ? [i] : []));
  return starts.map((start, n) => {
    const body = lines.slice(start, starts[n + 1] ?? lines.length);
    const signature = body.find((line) => /^\s*(?:async\s+)?\w+\s*\(/.test(line) && !line.trim().startsWith('@'));
    return { method: /(\w+)\s*\(/.exec(signature ?? '')?.[1] ?? '?', text: body.join('\n') };
  });
}

describe('no handler takes a raw @Query/@Body/@Headers or multipart field without parsing it', () => {
  const files = sourceFiles(SRC).map((file) => ({ name: path.relative(SRC, file), text: readFileSync(file, 'utf8') }));

  it('finds the handlers it checks', () => {
    const checked = files.flatMap((f) => routesOf(f.text).filter((r) => INPUT.test(r.text)));
    expect(checked.length).toBeGreaterThan(25);
  });

  it('parses each input with a declared schema, directly or through a named delegate, or says why not', () => {
    const unparsed: string[] = [];
    for (const file of files) {
      for (const route of routesOf(file.text)) {
        if (!INPUT.test(route.text)) continue;
        const key = `${file.name} ${route.method}`;
        const parsed = PARSES.test(route.text) || Object.keys(DELEGATES).some((call) => route.text.includes(call));
        if (parsed === Object.hasOwn(UNPARSED, key)) unparsed.push(parsed ? `${key} parses its input: take it off UNPARSED` : key);
      }
    }
    expect(unparsed).toEqual([]);
  });

  it('uses multipart fields only where the handler parses them', () => {
    const outside = files.filter((f) => /\blastValues\(/.test(f.text) && !/function lastValues\(/.test(f.text) && !PARSES.test(f.text)).map((f) => f.name);
    expect(outside).toEqual([]);
  });

  it.each(Object.entries(DELEGATES))('%s parses in %s', (call, file) => {
    const text = readFileSync(path.join(SRC, file), 'utf8');
    const name = /(\w+)\($/.exec(call)![1]!;
    expect(text).toMatch(new RegExp(`^\\s*(?:export\\s+)?(?:async\\s+)?(?:function\\s+)?${name}\\s*[(<]`, 'm'));
    expect(text).toMatch(PARSES);
  });

  it('parseV2Input calls parseWith', () => {
    expect(readFileSync(path.join(SRC, 'v2/parse-input.ts'), 'utf8')).toMatch(/export function parseV2Input\b[^]*?\bparseWith\(/);
  });
});

describe('no documented request header is read outside the parse by its declared schema', () => {
  const files = sourceFiles(SRC).map((file) => ({ name: path.relative(SRC, file), text: readFileSync(file, 'utf8') }));
  /** Each documented request header (lower case) with the names, in #libs/contracts, of the schemas its operations declare. */
  const declared = new Map<string, Set<string>>();
  for (const op of OPERATIONS) {
    for (const [header, spec] of Object.entries(op.headers ?? {})) {
      const name = Object.entries(contracts).find(([, value]) => value === spec.schema)?.[0] ?? '(an unnamed schema)';
      declared.set(header.toLowerCase(), (declared.get(header.toLowerCase()) ?? new Set()).add(name));
    }
  }
  const reads = files.flatMap((f) =>
    [...f.text.matchAll(/\bheaders(?:\[['"]([\w-]+)['"]\]|\.(\w+)\b(?!\())/g)]
      .map((m) => ({ file: f.name, header: (m[1] ?? m[2]!).toLowerCase(), line: f.text.slice(f.text.lastIndexOf('\n', m.index) + 1, f.text.indexOf('\n', m.index)) }))
      .filter((r) => declared.has(r.header)),
  );

  it('finds the reads it checks', () => {
    expect(reads.length).toBeGreaterThanOrEqual(9);
  });

  it('parses each with a schema its operation declares, or names where it is parsed or why not', () => {
    const outside: string[] = [];
    for (const read of reads) {
      const key = `${read.file} ${read.header}`;
      const accessor = `request\\.headers(?:\\['${read.header}'\\]|\\.${read.header}\\b)`;
      const parse = new RegExp(`\\b(?:parseWith|parseV2Input)\\((\\w+), ${accessor}`).exec(read.line);
      const parsed = parse !== null && declared.get(read.header)!.has(parse[1]!);
      if (parsed === Object.hasOwn(HEADER_READS, key)) outside.push(parsed ? `${key} is parsed where it is read: take it off HEADER_READS` : `${key}: ${read.line.trim()}`);
    }
    expect(outside).toEqual([]);
  });

  it.each(Object.entries(HEADER_READS).filter(([, r]) => 'parsedIn' in r))('%s is parsed where it says', (_key, read) => {
    const { parsedIn, call } = read as { parsedIn: string; call: string };
    expect(readFileSync(path.join(SRC, parsedIn), 'utf8')).toContain(call);
  });
});
