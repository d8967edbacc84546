import { buildDocument, OPERATIONS } from './index.js';

// The generated document's own consistency; openapi.e2e.test.ts proves it against the served routes.

describe('the generated OpenAPI document', () => {
  const doc = buildDocument('/gw') as { servers: unknown; paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>; components: { schemas: Record<string, unknown> } };

  it('lists each operation of the tables once, under the mount prefix as its server', () => {
    expect(doc.servers).toEqual([{ url: '/gw', description: 'This server' }]);
    const listed = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m} ${path}`));
    expect(listed.sort()).toEqual(OPERATIONS.map((o) => `${o.method} ${o.path}`).sort());
  });

  it('declares every path parameter of every template', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const [method, op] of Object.entries(item)) {
        const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
        expect({ method, path, declared }).toEqual({ method, path, declared: names });
      }
    }
  });

  it('references only components it defines, and is the same on every build', () => {
    const text = JSON.stringify(doc);
    for (const [, name] of text.matchAll(/"#\/components\/schemas\/([^"]+)"/g)) expect(doc.components.schemas[name!]).toBeDefined();
    expect(JSON.stringify(buildDocument('/gw'))).toBe(text);
  });

  it('declares JobWorkflow.format and keeps the optional asset fields optional, as the public v2 document does', () => {
    const schemas = doc.components.schemas as Record<string, { required?: string[] }>;
    expect(schemas.JobWorkflow!.required).toEqual(['workflow', 'format']);
    expect(schemas.Asset!.required!.sort()).toEqual(['content_type', 'created_at', 'hash', 'id', 'size_bytes', 'url', 'url_expires_at']);
  });
});
