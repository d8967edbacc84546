import { z } from 'zod';
import { COMPONENTS, documentedAs, isParsedFromText } from '#libs/contracts';
import type { HeaderSpec, Operation, ResponseSpec } from './operation.js';
import { ROUTER_OPERATIONS } from './router.js';
import { V1_OPERATIONS } from './v1.js';
import { V2_OPERATIONS } from './v2.js';

// The OpenAPI 3.1 document, generated from the operation tables and the wire schemas of
// libs/contracts: nothing in it is written by hand but prose. Pure: no server, no database, so
// `npm run openapi` writes the committed copy (openapi/openapi.json) without starting anything.

export const OPERATIONS: Operation[] = [...V2_OPERATIONS, ...V1_OPERATIONS, ...ROUTER_OPERATIONS];

type Json = Record<string, unknown>;

const DESCRIPTION = `Runs ComfyUI workflows as durable jobs.

- **v2** (\`/api/v2\`): jobs, assets, your account and webhooks. \`Authorization: Bearer <API key>\`. Errors are an ErrorEnvelope. Where this service goes beyond Comfy's public v2 contract, descriptions start with "Additive:".
- **v1** (\`/api\`, \`/ws\`): the deprecated engine-compatible API. \`X-API-Key: <API key>\` (WebSocket: \`?token=\`). As on the engine, every v1 route is also served without \`/api\` (\`/prompt\`, \`/userdata/...\`, \`/internal/...\`).
- **router** (\`/v1/models\`): direct partner-model calls. \`Authorization: Bearer <JWT>\`, or (additive) the account's API key in its place. Errors are a RouterErrorResponse with \`X-Service-Error-Type\`.

Paths are relative to the server URL (the \`BASE_PATH\` mount). A serverless deployment serves the same v2 paths under
\`/deployment/{deployment}\` or on its own host. Every response carries \`X-Request-Id\`.`;

const TAGS = [
  ['jobs', 'v2: durable, pollable, cancelable executions of a workflow.'],
  ['assets', 'v2: uploads and outputs, UUID records over content-addressed blobs.'],
  ['uploads', 'v2: resumable uploads (tus) for large files such as models.'],
  ['account', 'v2: your credit balance, charges, limits and usage (read-only).'],
  ['webhooks', 'v2: endpoints that receive your job events, signed per Standard Webhooks, and their deliveries.'],
  ['v1', 'Deprecated engine-compatible API.'],
  ['router', 'Model router: synchronous partner-model calls.'],
  ['health', 'Probes.'],
];

const SECURITY_SCHEMES = {
  apiKey: { type: 'http', scheme: 'bearer', description: 'An account API key (v2).' },
  v1ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An account API key (v1 REST).' },
  v1Token: { type: 'apiKey', in: 'query', name: 'token', description: 'An account API key (v1 WebSocket).' },
  routerJwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A router token (`sub` = account id), minted by an operator.' },
};

const ref = (id: string) => `#/components/schemas/${id}`;

/** `/api/v2/jobs/{id}/cancel` + post → `postApiV2JobsByIdCancel`. */
function operationId(op: Operation): string {
  const words = op.path
    .split(/[/_.-]+/)
    .filter(Boolean)
    .map((w) => (w.startsWith('{') ? `By${w.slice(1, 2).toUpperCase()}${w.slice(2, -1)}` : w[0]!.toUpperCase() + w.slice(1)));
  return op.method + words.join('');
}

/** Every schema an operation uses, in a stable order, each once. */
function schemasOf(op: Operation): z.ZodType[] {
  const out: z.ZodType[] = [];
  const headerSchemas = (h?: Record<string, HeaderSpec>) => Object.values(h ?? {}).map((s) => s.schema);
  if (op.params) out.push(op.params);
  if (op.query) out.push(op.query);
  out.push(...headerSchemas(op.headers));
  out.push(...Object.values(op.body?.content ?? {}));
  for (const r of Object.values(op.responses) as ResponseSpec[]) {
    out.push(...headerSchemas(r.headers));
    for (const s of Object.values(r.content ?? {})) if (s) out.push(s);
  }
  return out;
}

/** Converts every schema at once, so that a component used anywhere becomes a `$ref`. */
function convertAll(operations: Operation[]): { components: Record<string, Json>; inline: Map<z.ZodType, Json> } {
  const registry = z.registry<{ id: string }>();
  const ids = new Map<z.ZodType, string>();
  for (const [id, schema] of COMPONENTS) {
    registry.add(schema, { id });
    ids.set(schema, id);
  }
  const inlineIds = new Map<z.ZodType, string>();
  for (const schema of operations.flatMap(schemasOf)) {
    if (ids.has(schema) || inlineIds.has(schema)) continue;
    const id = `__inline${inlineIds.size}`;
    inlineIds.set(schema, id);
    registry.add(schema, { id });
  }
  const { schemas } = z.toJSONSchema(registry, {
    uri: ref,
    // Fields checked loosely here and judged later (a workflow) are documented as their component.
    // A query parameter parsed from its text is documented as that text.
    override: (ctx) => {
      const schema = ctx.zodSchema as unknown as z.ZodType;
      const id = documentedAs(schema);
      const text = isParsedFromText(schema);
      if (!id && !text) return;
      for (const key of Object.keys(ctx.jsonSchema)) delete (ctx.jsonSchema as Json)[key];
      if (id) (ctx.jsonSchema as Json).$ref = ref(id);
      else Object.assign(ctx.jsonSchema, clean(z.toJSONSchema(schema, { io: 'input' }) as Json));
    },
  }) as unknown as { schemas: Record<string, Json> };
  // An inline schema used inside another one arrives as a `$ref` to its made-up id: put it back in place.
  const resolveInline = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolveInline);
    if (!node || typeof node !== 'object') return node;
    const target = (node as Json).$ref;
    if (typeof target === 'string' && target.startsWith(ref('__inline'))) return resolveInline(clean(schemas[target.slice(ref('').length)]!));
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolveInline(v)]));
  };
  function clean(s: Json): Json {
    const { $schema: _s, $id: _i, ...rest } = s;
    return rest;
  }
  const components: Record<string, Json> = {};
  for (const [id] of COMPONENTS) components[id] = resolveInline(clean(schemas[id]!)) as Json;
  const inline = new Map<z.ZodType, Json>();
  for (const [schema, id] of inlineIds) inline.set(schema, resolveInline(clean(schemas[id]!)) as Json);
  return { components, inline: new Map([...inline, ...[...ids].map(([s, id]) => [s, { $ref: ref(id) }] as const)]) };
}

function parameters(schema: Json | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const props = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => {
    const { description, ...rest } = s;
    return { name, in: where, required: where === 'path' || required.has(name), ...(description ? { description } : {}), schema: rest };
  });
}

export function buildDocument(basePath: string): Json {
  const { components, inline } = convertAll(OPERATIONS);
  const json = (schema: z.ZodType): Json => inline.get(schema)!;
  const headerObject = (spec: HeaderSpec): Json => {
    const { description, ...schema } = json(spec.schema);
    const text = spec.description ?? (description as string | undefined);
    return { ...(text ? { description: text } : {}), ...(spec.required ? { required: true } : {}), schema };
  };
  const paths: Record<string, Record<string, Json>> = {};
  for (const op of OPERATIONS) {
    const params = [
      ...parameters(op.params && json(op.params), 'path'),
      ...parameters(op.query && json(op.query), 'query'),
      ...Object.entries(op.headers ?? {}).map(([name, spec]) => ({ name, in: 'header', required: spec.required ?? false, ...headerObject(spec) })),
    ];
    const responses: Record<string, Json> = {};
    for (const [status, r] of Object.entries(op.responses) as [string, ResponseSpec][]) {
      const content = r.content
        ? Object.fromEntries(
            Object.entries(r.content).map(([type, schema]) => [
              type,
              {
                ...(schema ? { schema: json(schema) } : {}),
                ...(r.examples && type === 'application/json' ? { examples: Object.fromEntries(Object.entries(r.examples).map(([k, value]) => [k, { value }])) } : {}),
              },
            ]),
          )
        : undefined;
      responses[status] = {
        description: r.description,
        ...(r.headers ? { headers: Object.fromEntries(Object.entries(r.headers).map(([name, spec]) => [name, headerObject(spec)])) } : {}),
        ...(content ? { content } : {}),
      };
    }
    (paths[op.path] ??= {})[op.method] = {
      operationId: operationId(op),
      tags: [op.tag],
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      security: op.security,
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(op.body
        ? { requestBody: { required: op.body.required, content: Object.fromEntries(Object.entries(op.body.content).map(([type, schema]) => [type, { schema: json(schema) }])) } }
        : {}),
      responses,
      ...(op.extra ?? {}),
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'comfy-cloud', description: DESCRIPTION, version: '2.0.0' },
    servers: [{ url: basePath || '/', description: 'This server' }],
    tags: TAGS.map(([name, description]) => ({ name, description })),
    paths,
    components: { securitySchemes: SECURITY_SCHEMES, schemas: components },
  };
}
