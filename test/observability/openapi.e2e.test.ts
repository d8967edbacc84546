import { readFileSync } from 'node:fs';
import { WebSocket } from 'ws';
import { ERROR_STATUS } from '#libs/contracts';
import { documentedOperations, exercisedOperations } from '../support/contract.js';
import { call, callWithHost } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';
import { dumpRoutes, type Route } from '../support/routes.js';

// The served document against the routes that exist: it is the committed openapi/openapi.json
// (`npm run openapi`), every documented operation is a route (and answers an unauthenticated
// request, as the document says it may), every route of the API is documented, and every error
// code of the contract is in the document.

const BASE = '/gw';
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head'];
/** The v2 contract's error codes (v2-jobs-and-assets.md, Errors). */
const CONTRACT_CODES = [
  'invalid_workflow', 'workflow_format_ui', 'missing_asset', 'hash_mismatch', 'blob_not_found', 'idempotency_key_reuse', 'queue_full',
  'insufficient_credits', 'not_found', 'unauthorized', 'forbidden', 'rate_limited', 'upstream_error', 'deployment_not_ready', 'deployment_stopped',
];
/** The router's 15 buckets (model-router.md, Errors). */
const ROUTER_BUCKETS = [
  'invalid_input', 'content_policy_violation', 'provider_error', 'provider_timeout', 'insufficient_credits', 'model_not_found', 'unauthorized',
  'forbidden', 'concurrency_limit_exceeded', 'client_disconnected', 'internal_error', 'deadline_exceeded', 'not_enabled', 'service_unavailable', 'rate_limited',
];
/** Served but not part of the tenant API: probes for Prometheus, the docs themselves, the tenant console's page, the operator dashboard. */
const OPERATIONAL = [/^\/metrics$/, /^\/openapi\.json$/, /^\/docs(\/|$)/, /^\/console(\/|$)/, /^\/admin\/queues(\/|$)/];

/** `/api/v2/jobs/{id}` to Fastify's `/api/v2/jobs/:id`. */
const toFastify = (path: string) => path.replace(/\{(\w+)\}/g, ':$1');
const shape = (url: string) => url.replace(/:\w+/g, ':p');

/** Every `$ref` in the document, for a dangling-reference check. */
function refsOf(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refsOf(n, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refsOf(v, out);
    }
  }
  return out;
}

const SAMPLE: Record<string, string> = {
  id: '3f2a1c9e-8b7d-4e6f-9a0b-1c2d3e4f5a6b',
  hash: 'a'.repeat(64),
  cls: 'KSampler',
  provider: 'acme',
  model: 'echo',
};

describe('OpenAPI document at /openapi.json and /docs', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;
  let doc: any;
  let routes: Route[];

  beforeAll(async () => {
    await stack.open();
    const env = { BASE_PATH: BASE, OPERATOR_TOKEN: 'op-token-0123456789abcdef' };
    api = await stack.startApi(env);
    const res = await call(`${api.url}${BASE}/openapi.json`);
    expect(res.status).toBe(200);
    doc = res.body;
    routes = (await dumpRoutes(stack.env(env))).filter((r) => r.url.startsWith(BASE)).map((r) => ({ ...r, url: r.url.slice(BASE.length) || '/' }));
  }, 60_000);
  afterAll(() => stack.close());

  const operations = () =>
    Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([m]) => METHODS.includes(m))
        .map(([method, op]) => ({ path, method: method.toUpperCase(), op })),
    );

  it('is the committed openapi/openapi.json (run `npm run openapi` after changing the contract)', () => {
    const committed = JSON.parse(readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8'));
    // The committed copy is built for no mount prefix; nothing else may differ.
    expect({ ...doc, servers: committed.servers }).toEqual(committed);
  });

  it('is OpenAPI 3.1 with the mount prefix as its server', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: BASE, description: expect.any(String) }]);
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['apiKey', 'routerJwt', 'v1ApiKey', 'v1Token']);
  });

  it('documents v2, v1 REST and router routes, each with a summary and responses', () => {
    const paths = Object.keys(doc.paths);
    for (const p of ['/api/v2/jobs', '/api/v2/jobs/{id}/cancel', '/api/v2/assets', '/api/prompt', '/api/view', '/v1/models', '/v1/models/{provider}/{model}']) expect(paths).toContain(p);
    for (const { path, method, op } of operations()) {
      expect({ path, method, summary: typeof op.summary }).toEqual({ path, method, summary: 'string' });
      expect(Object.keys(op.responses).length).toBeGreaterThan(0);
    }
  });

  it('resolves every $ref to a component', () => {
    const refs = refsOf(doc);
    expect(refs.length).toBeGreaterThan(50);
    for (const r of new Set(refs)) expect(doc.components.schemas[r.replace('#/components/schemas/', '')]).toBeDefined();
  });

  it('documents only routes that exist', () => {
    const served = new Set(routes.map((r) => `${r.method} ${shape(r.url)}`));
    for (const { path, method, op } of operations()) {
      if (op['x-websocket']) continue; // an upgrade, not a Fastify route: probed below
      expect(`${method} ${path} ${served.has(`${method} ${shape(toFastify(path))}`)}`).toBe(`${method} ${path} true`);
    }
  });

  it('documents every route of the API', () => {
    const documented = new Set(operations().map(({ path, method }) => `${method} ${shape(toFastify(path))}`));
    const gets = new Set(routes.filter((r) => r.method === 'GET').map((r) => r.url));
    const api = routes.filter(
      (r) =>
        !OPERATIONAL.some((re) => re.test(r.url)) &&
        // Fastify adds a HEAD for each GET.
        !(r.method === 'HEAD' && gets.has(r.url)) &&
        // The router's catch-alls serve model segments longer than Fastify's 100-character
        // parameter cap: the same operations as /v1/models/{provider}/{model}[/openapi.json].
        r.url !== '/v1/models/*' &&
        // The router's answer to a method it does not serve (405 with Allow) is no operation.
        !(r.url.startsWith('/v1/models') && (['PUT', 'PATCH', 'DELETE', 'OPTIONS'].includes(r.method) || (r.method === 'POST' && r.url === '/v1/models'))),
    );
    expect(api.length).toBeGreaterThan(30);
    const missing = api.filter((r) => !documented.has(`${r.method} ${shape(r.url)}`)).map((r) => `${r.method} ${r.url}`);
    expect(missing).toEqual([]);
  });

  it('answers each documented operation, unauthenticated, with something other than a routing 404', async () => {
    for (const { path, method, op } of operations()) {
      const url = `${api.url}${BASE}${path.replace(/\{(\w+)\}/g, (_, name: string) => SAMPLE[name] ?? 'x')}`;
      if (op['x-websocket']) {
        // An upgrade without a key is refused before the upgrade, with 401.
        const status = await new Promise<number>((resolve) => {
          const ws = new WebSocket(url.replace(/^http/, 'ws'));
          ws.on('unexpected-response', (_req, res) => {
            resolve(res.statusCode ?? 0);
            ws.terminate();
          });
          ws.on('open', () => {
            resolve(101);
            ws.close();
          });
          ws.on('error', () => resolve(-1));
        });
        expect({ path, status }).toEqual({ path, status: 401 });
        continue;
      }
      // Through call(): each answer is also checked against the document (contract-setup.ts).
      const res = await call(url, { method, ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}) });
      const text = res.text;
      const routingMiss = res.status === 404 && /Cannot |route was not found|"not_found"/.test(text) && !path.startsWith('/workflow');
      expect({ method, path, status: res.status, routingMiss }).toEqual({ method, path, status: expect.any(Number), routingMiss: false });
      if (!['/healthz', '/readyz'].includes(path) && !path.startsWith('/blobs/')) expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
    }
  });

  it('has every documented HTTP operation answered and checked against it by the test above', () => {
    const websockets = operations().filter(({ op }) => op['x-websocket']).map(({ path, method }) => `${method} ${path}`);
    const missing = documentedOperations().filter((o) => !exercisedOperations().has(o) && !websockets.includes(o));
    expect(missing).toEqual([]);
  });

  it('names every error code of the v2 contract and every router bucket', () => {
    const text = JSON.stringify(doc.paths);
    for (const code of CONTRACT_CODES) expect(`${code}: ${text.includes(`\`${code}\``)}`).toBe(`${code}: true`);
    expect(doc.components.schemas.ErrorCode.enum).toEqual(Object.keys(ERROR_STATUS));
    expect(doc.components.schemas.RouterErrorType.enum).toEqual(ROUTER_BUCKETS);
    for (const bucket of ROUTER_BUCKETS) expect(`${bucket}: ${text.includes(`\`${bucket}\``)}`).toBe(`${bucket}: true`);
    // Retry-After is documented wherever a 429 is.
    for (const { path, method, op } of operations()) {
      if (op.responses['429'] && !op['x-websocket']) expect({ path, method, retryAfter: Boolean(op.responses['429'].headers?.['Retry-After']) }).toEqual({ path, method, retryAfter: true });
    }
  });

  it('names the deployment prefix as the server of a deployment\'s document, by path or by host', async () => {
    const deployment = await stack.startApi({ BASE_PATH: BASE, SURFACE: 'deployment', DEPLOYMENT_DOMAIN: 'deploy.test' });
    const served = async (path: string, host?: string) => {
      const res = host ? await callWithHost(`${deployment.url}${path}`, host) : await call(`${deployment.url}${path}`);
      expect([path, host, res.status]).toEqual([path, host, 200]);
      return res;
    };
    const prefixed = (await served(`${BASE}/deployment/my-app/openapi.json`)).body;
    expect(prefixed.servers).toEqual([{ url: `${BASE}/deployment/my-app`, description: expect.any(String) }]);
    // The links of a deployment reached by host carry the prefix too; so does its document.
    expect((await served(`${BASE}/openapi.json`, 'my-app.deploy.test')).body.servers).toEqual(prefixed.servers);
    // Nothing else in it changes, and the same API's unprefixed document keeps the mount prefix.
    expect({ ...prefixed, servers: doc.servers }).toEqual(doc);
    expect((await served(`${BASE}/openapi.json`)).body.servers).toEqual(doc.servers);
    // The browsable page (its "try it out" calls) uses the same server.
    expect((await served(`${BASE}/deployment/my-app/docs/swagger-ui-init.js`)).text).toContain(`"url": "${BASE}/deployment/my-app"`);
  });

  it('serves a browsable page at /docs', async () => {
    const page = await call(`${api.url}${BASE}/docs`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('swagger-ui');
    const init = await call(`${api.url}${BASE}/docs/swagger-ui-init.js`);
    expect(init.status).toBe(200);
    expect(init.text).toMatch(/"openapi": ?"3\.1\.0"/);
  });
});
