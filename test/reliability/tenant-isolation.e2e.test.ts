import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import WebSocket from 'ws';
import { mintRouterToken } from '#libs/auth';
import { ExtraDataVault, jobKeys } from '#libs/jobs';
import { Redis } from 'ioredis';
import { startCloud, slowJob, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, callWithHost, jsonInit, uploadForm, type Reply } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { TEST_ROUTER_SECRET, TEST_SIGNING_SECRET, TestStack } from '../support/stack.js';
import { startPartnerSim, type PartnerSim } from '../../apps/partner-sim/src/server.js';
import { writeCatalog } from '../router/router-world.js';
import { testPng } from '../v1/v1-world.js';
import { dumpRoutes } from '../support/routes.js';

// Tenant isolation, endpoint by endpoint. Account A owns jobs (finished, running, queued), assets,
// v1 uploads, idempotency keys, a list cursor, router calls and a deployment. Account B uses A's
// identifiers on every route of the API and must get exactly what it gets for an identifier that
// does not exist: same status, same body (the identifier itself masked), same size, same headers
// that matter. Lists and feeds are compared with those of a fresh account C. At the end A's data is
// checked unchanged. The table below is the list of routes: a route the API serves that no row (and
// no entry of NOT_TENANT_SCOPED) names fails the first test.

const report = new ReliabilityReport('Tenant isolation', 5);
afterAll(() => report.save());

/** Routes that hold no tenant data, and why. */
const NOT_TENANT_SCOPED: Record<string, string> = {
  'GET /healthz': 'liveness probe',
  'HEAD /healthz': 'liveness probe',
  'GET /readyz': 'readiness probe',
  'HEAD /readyz': 'readiness probe',
  'GET /metrics': 'Prometheus scrape; no account labels',
  'HEAD /metrics': 'Prometheus scrape; no account labels',
  'GET /console': 'redirect to the tenant console page',
  'HEAD /console': 'redirect to the tenant console page',
  'GET /console/*': "the tenant console's static files; the page asks for a key and reads only through the public routes",
  'HEAD /console/*': "the tenant console's static files",
  'GET /docs/*': 'the API reference page and its assets',
  'HEAD /docs/*': 'the API reference page and its assets',
  'GET /api/features': 'static server features',
  'HEAD /api/features': 'static server features',
  'GET /api/system_stats': 'static shape, no host facts',
  'HEAD /api/system_stats': 'static shape, no host facts',
  'POST /api/free': 'accepted and ignored: no caller may empty the shared engines',
  'GET /api/extensions': 'always empty: the service serves no front end',
  'HEAD /api/extensions': 'always empty',
  'GET /api/models': "the engines' model folders, the same for everyone (a tenant's files count only in them)",
  'HEAD /api/models': "the engines' model folders",
  'GET /api/experiment/models': "the engines' model folders, the same for everyone",
  'HEAD /api/experiment/models': "the engines' model folders",
  'GET /api/internal/folder_paths': "the engines' model folders, with no path",
  'HEAD /api/internal/folder_paths': "the engines' model folders",
  'GET /api/i18n': 'always empty: the engines report no translations',
  'HEAD /api/i18n': 'always empty',
  'GET /api/workflow_templates': "always empty: the engines report no custom nodes' workflows",
  'HEAD /api/workflow_templates': 'always empty',
  'GET /templates/:p': 'the template index and the stock workflow, the same for everyone',
  'HEAD /templates/:p': 'the template index and the stock workflow',
  'GET /v1/models/:p/:p': 'the shared model catalog (entitlements, not tenant data)',
  'HEAD /v1/models/:p/:p': 'the shared model catalog',
  'GET /v1/models/:p/:p/openapi.json': 'the shared model catalog',
  'HEAD /v1/models/:p/:p/openapi.json': 'the shared model catalog',
  'GET /v1/models/*': 'the shared model catalog (ids longer than a path parameter allows)',
  'HEAD /v1/models/*': 'the shared model catalog',
  'POST /v1/models': '405: a method the router does not serve there',
  ...Object.fromEntries(['PUT', 'PATCH', 'DELETE', 'OPTIONS'].flatMap((m) => [`${m} /v1/models`, `${m} /v1/models/*`].map((r) => [r, '405: a method the router does not serve']))),
};

/** `/api/v2/jobs/{id}` and `/api/v2/jobs/:id` both to `/api/v2/jobs/:p`. */
const shape = (route: string) => route.replace(/\{\w+\}/g, ':p').replace(/:\w+/g, ':p');

/** What B can observe of an answer; the probed identifier is masked so A's and the unknown one compare. */
function fingerprint(r: Reply, probe: string[]) {
  let body = r.text;
  for (const value of probe) if (value) body = body.split(value).join('<probe>');
  return {
    status: r.status,
    contentType: r.headers.get('content-type'),
    contentLength: r.headers.get('content-length'),
    retryAfter: r.headers.get('retry-after'),
    location: r.headers.has('location'),
    replayed: r.headers.get('idempotent-replayed'),
    errorType: r.headers.get('x-service-error-type'),
    size: r.text.length,
    body,
  };
}
type Fingerprint = ReturnType<typeof fingerprint>;

/** One question B asks twice: about A's thing and about a thing nobody has. */
interface Probe {
  what: string;
  theirs: () => Promise<Fingerprint | unknown>;
  unknown: () => Promise<Fingerprint | unknown>;
  /** Status both must have (when the view has one). */
  status?: number;
}

interface Row {
  family: string;
  routes: string[];
  probes: () => Promise<Probe[]> | Probe[];
}

/** A socket that records everything it receives. */
class SocketRecorder {
  readonly texts: { type: string; data: any }[] = [];
  binaries = 0;
  readonly opened: Promise<void>;
  constructor(readonly ws: WebSocket) {
    this.opened = new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.on('message', (raw, isBinary) => {
      if (isBinary) this.binaries++;
      else this.texts.push(JSON.parse(raw.toString()) as { type: string; data: any });
    });
  }
  /** What the socket saw, with its own client id masked. */
  seen(sid: string): unknown {
    return { binaries: this.binaries, texts: this.texts.map((m) => JSON.parse(JSON.stringify(m).split(sid).join('<sid>'))) };
  }
}

describe('tenant isolation: account B learns nothing of account A and changes nothing of it', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let api: string;
  let deployApi: RunningProcess;
  let sim: PartnerSim;
  let redis: Redis;
  let routerEnv: Record<string, string>;

  // A's world.
  const A = {
    account: { id: '', key: '' },
    token: '',
    done: null as any,
    running: '',
    queued: '',
    outputAsset: '',
    outputHash: '',
    outputName: '',
    upload: null as any,
    uploadBytes: Buffer.alloc(0) as Buffer,
    v1Name: '',
    v1Bytes: Buffer.alloc(0) as Buffer,
    idemKey: `a-key-${randomUUID()}`,
    idemJob: '',
    cursor: '',
    assetCursor: '',
    accountCursor: '',
    jobIds: [] as string[],
    routerKey: `a-router-${randomUUID()}`,
    routerBody: { model: 'gpt-image-1', prompt: 'a red fox' },
    routerResult: '',
    routerCursor: '',
    deployment: 'alice-app',
    deploymentJob: '',
    partnerKey: `a-partner-${randomUUID()}`,
    userFile: `workflows/alice-${randomUUID()}.json`,
    userFileText: '{"alice": "secret workflow"}',
    settings: { 'Alice.Secret': `a-setting-${randomUUID()}` },
    model: null as any,
    modelName: `alice-style-${randomUUID().slice(0, 8)}.safetensors`,
    embedding: null as any,
    resumable: '',
    endpoint: null as any,
    endpointCursor: '',
    delivery: '',
  };
  const pinned = tinyImage(10);
  const sockets: { a: SocketRecorder; b: SocketRecorder; c: SocketRecorder; bAlias: SocketRecorder } = {} as never;

  async function fresh(name: string, router = false): Promise<{ id: string; key: string; token: string }> {
    const acct = await stack.account({ name });
    let token = '';
    if (router) {
      await stack.accounts.setLimits(acct.id, { routerEnabled: true, routerMaxConcurrent: 64, routerSpendCapCents: 100_000, routerWindowCalls: 100_000, routerWindowSeconds: 3600 });
      token = await mintRouterToken(TEST_ROUTER_SECRET, acct.id);
    }
    return { ...acct, token };
  }

  const v2 = (key: string, path: string, init: RequestInit = {}) =>
    call(`${api}${path}`, { ...init, headers: { ...bearer(key), ...(init.headers as Record<string, string>) }, signal: AbortSignal.timeout(15_000) });
  const v1 = (key: string, path: string, init: RequestInit = {}) =>
    call(`${api}${path}`, { ...init, headers: { 'x-api-key': key, ...(init.headers as Record<string, string>) }, signal: AbortSignal.timeout(15_000) });
  const v1Upload = (key: string, bytes: Uint8Array, fields: Record<string, string> = {}, path = '/api/upload/image') => {
    const form = new FormData();
    form.append('image', new Blob([bytes]), 'picture.png');
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    return call(`${api}${path}`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  };
  const router = (token: string, path: string, init: RequestInit = {}) =>
    call(`${api}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(init.headers as Record<string, string>) } });
  const randomHash = () => randomBytes(32).toString('hex');

  function socket(key: string, clientId: string, path = '/ws'): SocketRecorder {
    return new SocketRecorder(new WebSocket(`${api.replace('http', 'ws')}${path}?clientId=${clientId}&token=${key}`));
  }

  let B: { id: string; key: string; token: string };
  let C: { id: string; key: string; token: string };

  beforeAll(async () => {
    await stack.open();
    redis = new Redis(TEST_REDIS_URL);
    sim = await startPartnerSim({ timeScale: 0.005 });
    const catalog = writeCatalog(stack.blobDir);
    routerEnv = { ROUTER_CATALOG_FILE: catalog, ...sim.routerEnv() };
    cloud = await startCloud(stack, { api: routerEnv });
    api = cloud.api.url;
    deployApi = await stack.startApi({ ...routerEnv, SURFACE: 'deployment', DEPLOYMENT_DOMAIN: 'deploy.test' });

    const a = await fresh('alice', true);
    A.account = a;
    A.token = a.token;
    // One job at a time for A: its second job stays queued behind the running one.
    await stack.accounts.setLimits(a.id, { maxConcurrentJobs: 1 });
    C = await fresh('carol', true);

    // B (an account that does nothing else) and C listen on the v1 WebSocket while A's jobs run.
    const listener = await fresh('bob-listener');
    sockets.b = socket(listener.key, 'bob-socket');
    sockets.bAlias = socket(listener.key, 'bob-alias', '/api/ws');
    sockets.c = socket(C.key, 'carol-socket');
    // A listens too: proof that the feed carried A's jobs while B's and C's sockets stayed quiet.
    sockets.a = socket(a.key, 'alice-socket');
    await Promise.all([sockets.a.opened, sockets.b.opened, sockets.bAlias.opened, sockets.c.opened]);

    A.uploadBytes = randomBytes(300);
    A.upload = (await v2(a.key, '/api/v2/assets', { method: 'POST', body: uploadForm(A.uploadBytes, 'a-input.bin') })).body;
    // A's model files (a LoRA with metadata, an embedding) and a resumable upload A has begun.
    const modelBytes = Buffer.concat([Buffer.from([40, 0, 0, 0, 0, 0, 0, 0]), Buffer.from(JSON.stringify({ __metadata__: { author: 'alice' } }).padEnd(40))]);
    await waitUntil(async () => (await v1(a.key, '/api/models/loras')).status === 200, 20_000, 'the engine\'s model folders');
    A.model = (await v2(a.key, '/api/v2/assets', { method: 'POST', body: uploadForm(modelBytes, 'm.safetensors', { file_path: `models/loras/${A.modelName}` }) })).body;
    expect(A.model.file_path).toBe(`models/loras/${A.modelName}`);
    A.embedding = (await v2(a.key, '/api/v2/assets', { method: 'POST', body: uploadForm(randomBytes(64), 'e.pt', { file_path: 'models/embeddings/alice-secret-embedding.pt' }) })).body;
    const began = await v2(a.key, '/api/v2/uploads', { method: 'POST', headers: { 'tus-resumable': '1.0.0', 'upload-length': '1000', 'upload-metadata': `file_path ${Buffer.from('models/loras/big.safetensors').toString('base64')}` } });
    A.resumable = began.headers.get('location')!.split('/').pop()!;
    A.v1Bytes = testPng(8, 8, 42);
    A.v1Name = (await v1Upload(a.key, A.v1Bytes)).body.name;
    expect((await v1(a.key, `/api/userdata/${encodeURIComponent(A.userFile)}`, { method: 'POST', body: A.userFileText })).status).toBe(200);
    expect((await v1(a.key, '/api/settings', { method: 'POST', body: JSON.stringify(A.settings) })).status).toBe(200);

    const done = await v2(a.key, '/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(77) }, { prefer: 'wait=30' }));
    expect(done.body.status).toBe('succeeded');
    A.done = done.body;
    A.outputAsset = done.body.outputs[0].id;
    A.outputHash = done.body.outputs[0].hash.slice('blake3:'.length);
    A.outputName = done.body.outputs[0].name;
    const idem = await v2(a.key, '/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(78) }, { prefer: 'wait=30', 'idempotency-key': A.idemKey }));
    expect(idem.status).toBe(201);
    A.idemJob = idem.body.id;
    A.cursor = (await v2(a.key, '/api/v2/jobs?limit=1')).body.next_cursor;
    A.assetCursor = (await v2(a.key, '/api/v2/assets?limit=1')).body.next_cursor;
    await stack.accounts.addCredits(a.id, 1n);
    A.accountCursor = (await v2(a.key, '/api/v2/account?limit=1')).body.charges.next_cursor;

    const running = await v2(a.key, '/api/v2/jobs', jsonInit('POST', { workflow: slowJob(300_000) }));
    A.running = running.body.id;
    await waitUntil(async () => (await v2(a.key, `/api/v2/jobs/${A.running}`)).body.status === 'running', 20_000, "A's slow job running");
    const queued = await v2(a.key, '/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(79), extra_data: { api_key_comfy_org: A.partnerKey } }));
    A.queued = queued.body.id;

    const call1 = await router(A.token, '/v1/models/openai/gpt-image-1', { method: 'POST', body: JSON.stringify(A.routerBody), headers: { 'idempotency-key': A.routerKey } });
    expect(call1.status).toBe(200);
    A.routerResult = call1.text;
    A.routerCursor = (await router(A.token, '/v1/models?limit=1')).body.next_cursor;

    const file = `/tmp/${stack.name}-pinned.json`;
    writeFileSync(file, JSON.stringify(pinned));
    expect((await stack.admin(['deployment', 'create', '--account', a.id, '--id', A.deployment, '--workflow', file])).code).toBe(0);
    expect((await stack.admin(['deployment', 'ready', '--id', A.deployment])).code).toBe(0);
    const viaDeployment = await call(`${deployApi.url}/deployment/${A.deployment}/api/v2/jobs`, jsonInit('POST', { workflow: pinned }, bearer(a.key)));
    expect(viaDeployment.status).toBe(201);
    A.deploymentJob = viaDeployment.body.id;

    A.jobIds = (await v2(a.key, '/api/v2/jobs?limit=100')).body.data.map((j: { id: string }) => j.id);

    // Webhooks: two endpoints (one page of one has a cursor), and a delivery (a test event; no
    // webhooks process runs here, so it stays pending).
    A.endpoint = (await v2(a.key, '/api/v2/webhooks/endpoints', jsonInit('POST', { url: 'https://hooks.example.com/alice', description: 'alice hooks' }))).body;
    expect(A.endpoint.id).toBeDefined();
    expect((await v2(a.key, '/api/v2/webhooks/endpoints', jsonInit('POST', { url: 'https://hooks.example.com/alice-2' }))).status).toBe(201);
    A.endpointCursor = (await v2(a.key, '/api/v2/webhooks/endpoints?limit=1')).body.next_cursor;
    A.delivery = (await v2(a.key, `/api/v2/webhooks/endpoints/${A.endpoint.id}/test`, { method: 'POST' })).body.id;
  }, 120_000);

  afterAll(async () => {
    for (const s of Object.values(sockets)) s?.ws.terminate();
    redis?.disconnect();
    await sim?.stop();
    await stack.close();
  });

  // --- the table -------------------------------------------------------------------------------

  /** GET (and HEAD) of `path(value)` as B, for A's value and an unknown one. */
  const read = (what: string, send: (v: string, method: string) => Promise<Reply>, theirs: () => string, unknown: () => string, status: number, methods = ['GET', 'HEAD']): Probe[] =>
    methods.map((method) => ({
      what: `${method} ${what}`,
      theirs: async () => fingerprint(await send(theirs(), method), [theirs()]),
      unknown: async () => {
        const value = unknown();
        return fingerprint(await send(value, method), [value]);
      },
      status,
    }));

  /** The same request by B and by the fresh account C: a list or feed must not differ. */
  const same = (what: string, send: (who: typeof B) => Promise<Reply>, status = 200): Probe => ({
    what,
    theirs: async () => fingerprint(await send(B), []),
    unknown: async () => fingerprint(await send(C), []),
    status,
  });

  const v2Job = (suffix: string) => (id: string, method: string) => v2(B.key, `/api/v2/jobs/${id}${suffix}`, { method });
  const aJobs = () => [A.done.id, A.running, A.queued];

  const rows: Row[] = [
    {
      family: 'v2 job reads by id (get, workflow, logs, events SSE) for A\'s finished, running and queued jobs',
      routes: ['GET /api/v2/jobs/:id', 'HEAD /api/v2/jobs/:id', 'GET /api/v2/jobs/:id/workflow', 'HEAD /api/v2/jobs/:id/workflow', 'GET /api/v2/jobs/:id/logs', 'HEAD /api/v2/jobs/:id/logs', 'GET /api/v2/jobs/:id/events', 'HEAD /api/v2/jobs/:id/events'],
      probes: () =>
        ['', '/workflow', '/logs', '/events'].flatMap((suffix) =>
          aJobs().flatMap((_, i) => read(`/api/v2/jobs/:id${suffix} (A's job #${i + 1})`, v2Job(suffix), () => aJobs()[i]!, () => randomUUID(), 404)),
        ),
    },
    {
      family: 'v2 cancel of A\'s finished, running and queued jobs',
      routes: ['POST /api/v2/jobs/:id/cancel'],
      probes: () => aJobs().flatMap((_, i) => read(`/api/v2/jobs/:id/cancel (A's job #${i + 1})`, v2Job('/cancel'), () => aJobs()[i]!, () => randomUUID(), 404, ['POST'])),
    },
    {
      family: 'v2 job list: contents, and A\'s page cursor',
      routes: ['GET /api/v2/jobs', 'HEAD /api/v2/jobs'],
      probes: () => [
        same('GET /api/v2/jobs (B vs a fresh account)', (who) => v2(who.key, '/api/v2/jobs?limit=100')),
        same('HEAD /api/v2/jobs', (who) => v2(who.key, '/api/v2/jobs', { method: 'HEAD' })),
        same('GET /api/v2/jobs?status=running,queued', (who) => v2(who.key, '/api/v2/jobs?status=running,queued')),
        // A cursor with its signature altered is one the server never issued.
        ...read('/api/v2/jobs?cursor=A\'s cursor', (c, m) => v2(B.key, `/api/v2/jobs?cursor=${encodeURIComponent(c)}`, { method: m }), () => A.cursor, () => forge(A.cursor), 400),
      ],
    },
    {
      family: 'v2 submission: A\'s Idempotency-Key (same and other body), A\'s asset in the workflow',
      routes: ['POST /api/v2/jobs'],
      probes: () => {
        // Each keyed submission by its own fresh B: a key B used once is B's own from then on.
        const submitView = async (key: string, workflow: unknown) => {
          const b = await fresh('bob-keyed');
          const r = await v2(b.key, '/api/v2/jobs', jsonInit('POST', { workflow }, { 'idempotency-key': key }));
          return { status: r.status, replayed: r.headers.get('idempotent-replayed'), ownJob: r.body?.id !== A.idemJob && typeof r.body?.id === 'string', keys: Object.keys(r.body ?? {}).sort() };
        };
        const withAsset = (id: string) => ({
          '1': { class_type: 'LoadImage', inputs: { image: { __type: 'core/ASSET', info: { id, file_path: 'a-input.bin' } } } },
          '2': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } },
        });
        return [
          { what: 'Idempotency-Key of A, A\'s body', theirs: () => submitView(A.idemKey, tinyImage(78)), unknown: () => submitView(`fresh-${randomUUID()}`, tinyImage(78)), status: 201 },
          { what: 'Idempotency-Key of A, another body', theirs: () => submitView(A.idemKey, tinyImage(55)), unknown: () => submitView(`fresh-${randomUUID()}`, tinyImage(55)), status: 201 },
          ...[() => A.upload.id, () => A.outputAsset].map((asset, i) => ({
            what: `A's asset #${i + 1} referenced in B's workflow`,
            theirs: async () => fingerprint(await v2(B.key, '/api/v2/jobs', jsonInit('POST', { workflow: withAsset(asset()) })), [asset()]),
            unknown: async () => {
              const id = randomUUID();
              return fingerprint(await v2(B.key, '/api/v2/jobs', jsonInit('POST', { workflow: withAsset(id) })), [id]);
            },
            status: 422,
          })),
        ];
      },
    },
    {
      family: 'v2 asset list: contents, by kind, and A\'s page cursor',
      routes: ['GET /api/v2/assets', 'HEAD /api/v2/assets'],
      probes: () => [
        same('GET /api/v2/assets (B vs a fresh account)', (who) => v2(who.key, '/api/v2/assets?limit=100')),
        same('HEAD /api/v2/assets', (who) => v2(who.key, '/api/v2/assets', { method: 'HEAD' })),
        same('GET /api/v2/assets?kind=output', (who) => v2(who.key, '/api/v2/assets?kind=output')),
        ...read('/api/v2/assets?cursor=A\'s cursor', (c, m) => v2(B.key, `/api/v2/assets?cursor=${encodeURIComponent(c)}`, { method: m }), () => A.assetCursor, () => forge(A.assetCursor), 400),
      ],
    },
    {
      family: 'v2 account: balance, ledger, limits and usage are the caller\'s own; A\'s ledger cursor',
      routes: ['GET /api/v2/account', 'HEAD /api/v2/account'],
      probes: () => {
        // B and C differ in their ids, names and times; what either could learn of A would show
        // in the rest: the balance, the ledger's entries, the usage counts.
        const accountView = async (who: typeof B) => {
          const r = await v2(who.key, '/api/v2/account?limit=100');
          const b = r.body;
          return {
            status: r.status,
            ownId: b.id === who.id,
            mentionsA: [A.account.id, ...A.jobIds].some((v) => r.text.includes(v)),
            balance: b.credit_balance,
            charges: b.charges.data.map((e: { amount: number; reason: string; ref: string | null }) => [e.amount, e.reason, e.ref]),
            usage: { running: b.usage.running_jobs, queued: b.usage.queued_jobs },
            limits: b.limits,
            router: b.router,
          };
        };
        const accountHead = async (who: typeof B) => {
          const r = await v2(who.key, '/api/v2/account', { method: 'HEAD' });
          return { status: r.status, contentType: r.headers.get('content-type'), body: r.text };
        };
        return [
          { what: 'GET /api/v2/account (B vs a fresh account)', theirs: () => accountView(B), unknown: () => accountView(C), status: 200 },
          { what: 'HEAD /api/v2/account (its length is that of the caller\'s own name and figures)', theirs: () => accountHead(B), unknown: () => accountHead(C), status: 200 },
          ...read('/api/v2/account?cursor=A\'s ledger cursor', (c, m) => v2(B.key, `/api/v2/account?cursor=${encodeURIComponent(c)}`, { method: m }), () => A.accountCursor, () => forge(A.accountCursor), 400),
        ];
      },
    },
    {
      family: 'v2 asset reads by id (record, content) for A\'s upload and output',
      routes: ['GET /api/v2/assets/:id', 'HEAD /api/v2/assets/:id', 'GET /api/v2/assets/:id/content', 'HEAD /api/v2/assets/:id/content'],
      probes: () =>
        ['', '/content'].flatMap((suffix) =>
          [() => A.upload.id as string, () => A.outputAsset].flatMap((asset, i) =>
            read(`/api/v2/assets/:id${suffix} (A's asset #${i + 1})`, (id, m) => v2(B.key, `/api/v2/assets/${id}${suffix}`, { method: m }), asset, () => randomUUID(), 404),
          ),
        ),
    },
    {
      family: 'v2 asset delete of A\'s upload and output',
      routes: ['DELETE /api/v2/assets/:id'],
      probes: () =>
        [() => A.upload.id as string, () => A.outputAsset].flatMap((asset, i) =>
          read(`/api/v2/assets/:id (A's asset #${i + 1})`, (id, m) => v2(B.key, `/api/v2/assets/${id}`, { method: m }), asset, () => randomUUID(), 404, ['DELETE']),
        ),
    },
    {
      family: 'v2 blobs by A\'s hashes: exists-check, asset from hash, upload of A\'s bytes',
      routes: ['HEAD /api/v2/assets/by-hash/:hash', 'POST /api/v2/assets/from-hash', 'POST /api/v2/assets'],
      probes: () => {
        const hashes = [() => A.upload.hash.slice('blake3:'.length) as string, () => A.outputHash];
        const upload = async (bytes: Uint8Array) => {
          const r = await v2(B.key, '/api/v2/assets', { method: 'POST', body: uploadForm(bytes, 'b.bin') });
          return { status: r.status, created_new: r.body?.created_new, keys: Object.keys(r.body ?? {}).sort() };
        };
        return [
          ...hashes.flatMap((hash, i) => [
            ...read(`/api/v2/assets/by-hash/:hash (A's blob #${i + 1})`, (h, m) => v2(B.key, `/api/v2/assets/by-hash/blake3:${h}`, { method: m }), hash, randomHash, 404, ['HEAD']),
            {
              what: `POST /api/v2/assets/from-hash (A's blob #${i + 1})`,
              theirs: async () => fingerprint(await v2(B.key, '/api/v2/assets/from-hash', jsonInit('POST', { hash: `blake3:${hash()}` })), [hash()]),
              unknown: async () => {
                const h = randomHash();
                return fingerprint(await v2(B.key, '/api/v2/assets/from-hash', jsonInit('POST', { hash: `blake3:${h}` })), [h]);
              },
              status: 404,
            },
          ]),
          { what: 'POST /api/v2/assets with the bytes of A\'s upload (created_new is about the caller)', theirs: () => upload(A.uploadBytes), unknown: () => upload(randomBytes(A.uploadBytes.length)), status: 201 },
        ];
      },
    },
    {
      family: 'signed blob URLs: A\'s hash without a signature',
      routes: ['GET /blobs/:hash', 'HEAD /blobs/:hash'],
      probes: () => [() => A.upload.hash.slice('blake3:'.length) as string, () => A.outputHash].flatMap((hash, i) => read(`/blobs/:hash (A's blob #${i + 1})`, (h, m) => call(`${api}/blobs/${h}`, { method: m }), hash, randomHash, 403)),
    },
    {
      family: 'v1 job status and history by A\'s prompt ids',
      routes: ['GET /api/job/:id/status', 'HEAD /api/job/:id/status', 'GET /api/history/:id', 'HEAD /api/history/:id'],
      probes: () =>
        aJobs().flatMap((_, i) => [
          ...read(`/api/job/:id/status (A's job #${i + 1})`, (id, m) => v1(B.key, `/api/job/${id}/status`, { method: m }), () => aJobs()[i]!, () => randomUUID(), 404),
          ...read(`/api/history/:id (A's job #${i + 1})`, (id, m) => v1(B.key, `/api/history/${id}`, { method: m }), () => aJobs()[i]!, () => randomUUID(), 200),
        ]),
    },
    {
      family: 'v1 lists and feeds: queue, prompt info, history, object_info (A\'s uploads as choices)',
      routes: ['GET /api/queue', 'HEAD /api/queue', 'GET /api/prompt', 'HEAD /api/prompt', 'GET /api/history', 'HEAD /api/history', 'GET /api/object_info', 'HEAD /api/object_info', 'GET /api/object_info/:cls', 'HEAD /api/object_info/:cls'],
      probes: () =>
        ['/api/queue', '/api/prompt', '/api/history', '/api/object_info', '/api/object_info/LoadImage'].flatMap((path) => [
          same(`GET ${path} (B vs a fresh account)`, (who) => v1(who.key, path)),
          same(`HEAD ${path}`, (who) => v1(who.key, path, { method: 'HEAD' })),
        ]),
    },
    {
      family: 'v1 queue delete, queue clear and interrupt aimed at A\'s running and queued jobs',
      routes: ['POST /api/queue', 'POST /api/interrupt'],
      probes: () => [
        {
          what: 'POST /api/queue {delete: [A\'s running, A\'s queued]}',
          theirs: async () => fingerprint(await v1(B.key, '/api/queue', jsonInit('POST', { delete: [A.running, A.queued] })), []),
          unknown: async () => fingerprint(await v1(B.key, '/api/queue', jsonInit('POST', { delete: [randomUUID(), randomUUID()] })), []),
          status: 200,
        },
        same('POST /api/queue {clear: true}', (who) => v1(who.key, '/api/queue', jsonInit('POST', { clear: true }))),
        {
          what: 'POST /api/interrupt {prompt_id: A\'s running}',
          theirs: async () => fingerprint(await v1(B.key, '/api/interrupt', jsonInit('POST', { prompt_id: A.running })), []),
          unknown: async () => fingerprint(await v1(B.key, '/api/interrupt', jsonInit('POST', { prompt_id: randomUUID() })), []),
          status: 200,
        },
        same('POST /api/interrupt {}', (who) => v1(who.key, '/api/interrupt', jsonInit('POST', {}))),
      ],
    },
    {
      family: "v1 history delete and clear aimed at A's finished job",
      routes: ['POST /api/history'],
      probes: () => [
        {
          what: "POST /api/history {delete: [A's finished job]}",
          theirs: async () => fingerprint(await v1(B.key, '/api/history', jsonInit('POST', { delete: [A.done.id] })), []),
          unknown: async () => fingerprint(await v1(B.key, '/api/history', jsonInit('POST', { delete: [randomUUID()] })), []),
          status: 200,
        },
        same('POST /api/history {clear: true}', (who) => v1(who.key, '/api/history', jsonInit('POST', { clear: true }))),
      ],
    },
    {
      family: 'v1 files by A\'s names: view of A\'s upload and output, mask over A\'s upload, upload of A\'s bytes',
      routes: ['GET /api/view', 'HEAD /api/view', 'POST /api/upload/mask', 'POST /api/upload/image'],
      probes: () => {
        const unknownName = () => `${randomHash()}.png`;
        const mask = (name: string) => v1Upload(B.key, testPng(8, 8, 3, true), { original_ref: JSON.stringify({ filename: name, subfolder: '', type: 'input' }), type: 'input' }, '/api/upload/mask');
        const upload = async (bytes: Uint8Array) => {
          const r = await v1Upload(B.key, bytes);
          return { status: r.status, keys: Object.keys(r.body ?? {}).sort(), name: /^[0-9a-f]{64}\.png$/.test(r.body?.name), subfolder: r.body?.subfolder, type: r.body?.type };
        };
        return [
          ...read("/api/view?filename=A's upload&type=input", (n, m) => v1(B.key, `/api/view?filename=${n}&type=input`, { method: m }), () => A.v1Name, unknownName, 404),
          ...read("/api/view?filename=A's output&subfolder=A's job&type=output", (job, m) => v1(B.key, `/api/view?filename=${A.outputName}&subfolder=${job}&type=output`, { method: m }), () => A.done.id, () => randomUUID(), 404),
          {
            what: "POST /api/upload/mask with original_ref A's upload",
            theirs: async () => fingerprint(await mask(A.v1Name), [A.v1Name]),
            unknown: async () => {
              const n = unknownName();
              return fingerprint(await mask(n), [n]);
            },
            status: 404,
          },
          { what: 'POST /api/upload/image with the bytes of A\'s upload', theirs: () => upload(A.v1Bytes), unknown: () => upload(testPng(8, 8, 43)), status: 200 },
        ];
      },
    },
    {
      family: 'v1 prompts naming A\'s files (upload name, output reference, asset reference)',
      routes: ['POST /api/prompt'],
      probes: () => {
        const load = (image: unknown) => ({
          '1': { class_type: 'LoadImage', inputs: { image } },
          '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'b' } },
        });
        const promptProbe = (what: string, theirs: () => string, unknown: () => string, image: (v: string) => unknown): Probe => ({
          what,
          theirs: async () => fingerprint(await v1(B.key, '/api/prompt', jsonInit('POST', { prompt: load(image(theirs())) })), [theirs()]),
          unknown: async () => {
            const u = unknown();
            return fingerprint(await v1(B.key, '/api/prompt', jsonInit('POST', { prompt: load(image(u)) })), [u]);
          },
          status: 400,
        });
        return [
          promptProbe("A's upload name", () => A.v1Name, () => `${randomHash()}.png`, (v) => v),
          promptProbe("A's output as <job>/<name> [output]", () => A.done.id, () => randomUUID(), (v) => `${v}/${A.outputName} [output]`),
          promptProbe("A's asset as a core/ASSET reference", () => A.upload.id, () => randomUUID(), (v) => ({ __type: 'core/ASSET', info: { id: v } })),
        ];
      },
    },
    {
      family: "v1 user data by A's file and folder names: read, list, write, delete, move",
      routes: [
        'GET /api/userdata', 'HEAD /api/userdata', 'GET /api/userdata/:file', 'HEAD /api/userdata/:file', 'POST /api/userdata/:file', 'DELETE /api/userdata/:file',
        'POST /api/userdata/:file/move/:dest', 'GET /api/v2/userdata', 'HEAD /api/v2/userdata',
      ],
      probes: () => {
        const unknownFile = () => `workflows/bobby-${randomUUID()}.json`;
        const enc = encodeURIComponent;
        return [
          ...read("/api/userdata/{A's file}", (f, m) => v1(B.key, `/api/userdata/${enc(f)}`, { method: m }), () => A.userFile, unknownFile, 404),
          ...read("/api/userdata?dir={A's folder}", (d, m) => v1(B.key, `/api/userdata?dir=${enc(d)}&recurse=true`, { method: m }), () => 'workflows', () => `nofolder-${randomUUID()}`, 404),
          ...read("/api/v2/userdata?path={A's folder}", (d, m) => v1(B.key, `/api/v2/userdata?path=${enc(d)}`, { method: m }), () => 'workflows', () => `nofolder-${randomUUID()}`, 404),
          ...read("DELETE /api/userdata/{A's file}", (f) => v1(B.key, `/api/userdata/${enc(f)}`, { method: 'DELETE' }), () => A.userFile, unknownFile, 404, ['DELETE']),
          ...read("/api/userdata/{A's file}/move/elsewhere.json", (f) => v1(B.key, `/api/userdata/${enc(f)}/move/elsewhere.json`, { method: 'POST' }), () => A.userFile, unknownFile, 404, ['POST']),
          // Writing under A's name with overwrite=false: no conflict, B gets a file of its own.
          ...read("POST /api/userdata/{A's file}?overwrite=false", (f) => v1(B.key, `/api/userdata/${enc(f)}?overwrite=false`, { method: 'POST', body: '{}' }), () => A.userFile, unknownFile, 200, ['POST']),
        ];
      },
    },
    {
      family: 'v1 settings and users (B vs a fresh account)',
      routes: ['GET /api/settings', 'HEAD /api/settings', 'POST /api/settings', 'GET /api/settings/:id', 'HEAD /api/settings/:id', 'POST /api/settings/:id', 'GET /api/users', 'HEAD /api/users', 'POST /api/users'],
      probes: () => [
        same('GET /api/settings', (who) => v1(who.key, '/api/settings')),
        same('HEAD /api/settings', (who) => v1(who.key, '/api/settings', { method: 'HEAD' })),
        same("GET /api/settings/{A's setting}", (who) => v1(who.key, '/api/settings/Alice.Secret')),
        same("HEAD /api/settings/{A's setting}", (who) => v1(who.key, '/api/settings/Alice.Secret', { method: 'HEAD' })),
        same('GET /api/users', (who) => v1(who.key, '/api/users')),
        same('HEAD /api/users', (who) => v1(who.key, '/api/users', { method: 'HEAD' })),
        same("POST /api/settings {A's setting}", (who) => v1(who.key, '/api/settings', { method: 'POST', body: JSON.stringify({ 'Alice.Secret': 'overwritten?' }) })),
        same("POST /api/settings/{A's setting}", (who) => v1(who.key, '/api/settings/Alice.Secret', { method: 'POST', body: '"overwritten?"' })),
        same('POST /api/users', (who) => v1(who.key, '/api/users', { method: 'POST', body: JSON.stringify({ username: 'alice' }) }), 400),
      ],
    },
    {
      family: "v1 log terminal and folder lists while A's jobs have logs (B vs a fresh account)",
      routes: ['GET /api/internal/logs', 'HEAD /api/internal/logs', 'GET /api/internal/logs/raw', 'HEAD /api/internal/logs/raw', 'PATCH /api/internal/logs/subscribe', 'GET /api/internal/files/:directory_type', 'HEAD /api/internal/files/:directory_type'],
      probes: () => [
        same('GET /api/internal/logs', (who) => v1(who.key, '/api/internal/logs')),
        same('HEAD /api/internal/logs', (who) => v1(who.key, '/api/internal/logs', { method: 'HEAD' })),
        same('GET /api/internal/logs/raw', (who) => v1(who.key, '/api/internal/logs/raw')),
        same('HEAD /api/internal/logs/raw', (who) => v1(who.key, '/api/internal/logs/raw', { method: 'HEAD' })),
        same("PATCH /api/internal/logs/subscribe {A's socket id}", (who) => v1(who.key, '/api/internal/logs/subscribe', { method: 'PATCH', body: JSON.stringify({ clientId: 'alice-socket', enabled: true }) })),
        ...['input', 'output', 'temp'].flatMap((type) => [
          same(`GET /api/internal/files/${type}`, (who) => v1(who.key, `/api/internal/files/${type}`)),
          same(`HEAD /api/internal/files/${type}`, (who) => v1(who.key, `/api/internal/files/${type}`, { method: 'HEAD' })),
        ]),
      ],
    },
    {
      family: 'v1 WebSocket feed while A\'s jobs run (/ws and /api/ws)',
      routes: ['GET /ws', 'GET /api/ws'],
      probes: () => [
        { what: '/ws: everything B received vs a fresh account', theirs: async () => sockets.b.seen('bob-socket'), unknown: async () => sockets.c.seen('carol-socket') },
        { what: '/api/ws: everything B received vs a fresh account', theirs: async () => sockets.bAlias.seen('bob-alias'), unknown: async () => sockets.c.seen('carol-socket') },
        {
          what: "A's own socket carried A's finished job (the feed was live meanwhile)",
          theirs: async () => ({ live: sockets.a.texts.some((m) => m.type === 'execution_success' && m.data?.prompt_id === A.done.id) }),
          unknown: async () => ({ live: true }),
        },
      ],
    },
    {
      family: 'router calls with A\'s Idempotency-Key (same and other body), and A\'s page cursor',
      routes: ['POST /v1/models/:provider/:model', 'POST /v1/models/*', 'GET /v1/models', 'HEAD /v1/models'],
      probes: () => {
        // Each keyed call by its own fresh B: a key B used once is B's own from then on.
        const callView = async (key: string, body: unknown) => {
          const b = await fresh('bob-keyed', true);
          const r = await router(b.token, '/v1/models/openai/gpt-image-1', { method: 'POST', body: JSON.stringify(body), headers: { 'idempotency-key': key } });
          return {
            status: r.status,
            replayed: r.headers.get('idempotent-replayed'),
            errorType: r.headers.get('x-service-error-type'),
            detail: r.status >= 400 ? r.body?.detail : undefined,
            notA: r.text !== A.routerResult,
            keys: Object.keys(r.body ?? {}).sort(),
          };
        };
        return [
          { what: "POST /v1/models/openai/gpt-image-1 with A's key, A's body", theirs: () => callView(A.routerKey, A.routerBody), unknown: () => callView(`fresh-${randomUUID()}`, A.routerBody), status: 200 },
          { what: "POST /v1/models/openai/gpt-image-1 with A's key, another body", theirs: () => callView(A.routerKey, { model: 'gpt-image-1', prompt: 'a blue whale' }), unknown: () => callView(`fresh-${randomUUID()}`, { model: 'gpt-image-1', prompt: 'a blue whale' }), status: 200 },
          ...read("/v1/models?cursor=A's cursor", (c, m) => router(B.token, `/v1/models?cursor=${encodeURIComponent(c)}`, { method: m }), () => A.routerCursor, () => forge(A.routerCursor), 400),
        ];
      },
    },
    {
      family: "v1 model lists and metadata while A has model files (B vs a fresh account; A's file name)",
      routes: ['GET /api/models/:p', 'HEAD /api/models/:p', 'GET /api/experiment/models/:p', 'HEAD /api/experiment/models/:p', 'GET /api/embeddings', 'HEAD /api/embeddings', 'GET /api/view_metadata/:p', 'HEAD /api/view_metadata/:p'],
      probes: () => [
        ...['/api/models/loras', '/api/experiment/models/loras', '/api/embeddings', '/api/object_info/LoraLoader'].flatMap((path) => [
          same(`GET ${path} (B vs a fresh account)`, (who) => v1(who.key, path)),
          same(`HEAD ${path}`, (who) => v1(who.key, path, { method: 'HEAD' })),
        ]),
        ...read("/api/view_metadata/loras?filename={A's LoRA}", (n, m) => v1(B.key, `/api/view_metadata/loras?filename=${n}`, { method: m }), () => A.modelName, () => `alice-style-${randomBytes(4).toString('hex')}.safetensors`, 404),
      ],
    },
    {
      family: "v2 and v1 submissions naming A's model files: by name, by asset reference, in an embedding",
      routes: ['POST /api/v2/jobs', 'POST /api/prompt'],
      probes: () => {
        const withLora = (lora: unknown) => ({
          '4': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'v1-5-pruned-emaonly.safetensors' } },
          '10': { class_type: 'LoraLoader', inputs: { model: ['4', 0], clip: ['4', 1], lora_name: lora, strength_model: 1, strength_clip: 1 } },
          '11': { class_type: 'PreviewAny', inputs: { source: ['10', 0] } },
        });
        // As long as A's name: the answers are compared byte for byte, the name masked.
        const unknownName = () => `alice-style-${randomBytes(4).toString('hex')}.safetensors`;
        // What the job runs (as stored, after resolution) carries no asset: no file of A's goes to the engine.
        const embeddingJob = async (name: string) => {
          const r = await v2(B.key, '/api/v2/jobs', jsonInit('POST', { workflow: { '1': { class_type: 'PrimitiveString', inputs: { value: `a cat embedding:${name}` } }, '2': { class_type: 'PreviewAny', inputs: { source: ['1', 0] } } } }));
          const stored = await stack.db.job.findUnique({ where: { id: r.body.id }, select: { workflow: true } });
          return { status: r.status, carriesAsset: JSON.stringify(stored?.workflow).includes('core/ASSET') };
        };
        return [
          ...read("POST /api/v2/jobs naming A's LoRA", (n) => v2(B.key, '/api/v2/jobs', jsonInit('POST', { workflow: withLora(n) })), () => A.modelName, unknownName, 422, ['POST']),
          ...read("POST /api/prompt naming A's LoRA", (n) => v1(B.key, '/api/prompt', jsonInit('POST', { prompt: withLora(n) })), () => A.modelName, unknownName, 400, ['POST']),
          ...read("POST /api/v2/jobs with A's LoRA asset in the slot", (id) => v2(B.key, '/api/v2/jobs', jsonInit('POST', { workflow: withLora({ __type: 'core/ASSET', info: { id } }) })), () => A.model.id, () => randomUUID(), 422, ['POST']),
          // The embedding's name rides along with no file of A's: the job is B's own, like one naming nothing.
          {
            what: "POST /api/v2/jobs whose prompt names A's embedding",
            theirs: () => embeddingJob('alice-secret-embedding'),
            unknown: () => embeddingJob('nobody-embedding'),
            status: 201,
          },
        ];
      },
    },
    {
      family: "v2 resumable uploads: A's upload in progress (offset, append, abandon), and creating one",
      routes: ['POST /api/v2/uploads', 'HEAD /api/v2/uploads/:id', 'PATCH /api/v2/uploads/:id', 'DELETE /api/v2/uploads/:id'],
      probes: () => {
        const tus = (id: string, method: string, extra: Record<string, string> = {}, body?: Uint8Array) => v2(B.key, `/api/v2/uploads/${id}`, { method, headers: { 'tus-resumable': '1.0.0', ...extra }, body });
        const unknownId = () => `${randomBytes(6).toString('hex')}-${randomBytes(16).toString('hex')}`;
        return [
          ...read("HEAD /api/v2/uploads/{A's upload}", (id) => tus(id, 'HEAD'), () => A.resumable, unknownId, 404, ['HEAD']),
          ...read("PATCH /api/v2/uploads/{A's upload}", (id) => tus(id, 'PATCH', { 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, randomBytes(1000)), () => A.resumable, unknownId, 404, ['PATCH']),
          ...read("DELETE /api/v2/uploads/{A's upload}", (id) => tus(id, 'DELETE'), () => A.resumable, unknownId, 404, ['DELETE']),
          same('POST /api/v2/uploads (B vs a fresh account)', (who) =>
            v2(who.key, '/api/v2/uploads', { method: 'POST', headers: { 'tus-resumable': '1.0.0', 'upload-length': '10', 'upload-metadata': `file_path ${Buffer.from('models/loras/big.safetensors').toString('base64')}` } }), 201),
        ];
      },
    },
    {
      family: "v2 import by URL: A's blob behind the API's own address (no loopback here), B vs a fresh account",
      routes: ['POST /api/v2/assets/from-url'],
      probes: () => [
        ...read("POST /api/v2/assets/from-url of A's blob", (h) => v2(B.key, '/api/v2/assets/from-url', jsonInit('POST', { url: `${api}/blobs/${h}` })), () => A.model.hash.slice('blake3:'.length), randomHash, 422, ['POST']),
        same('POST /api/v2/assets/from-url (B vs a fresh account)', (who) => v2(who.key, '/api/v2/assets/from-url', jsonInit('POST', { url: 'http://169.254.169.254/latest/meta-data/' })), 422),
      ],
    },
    {
      family: "v2 webhook endpoints and deliveries by A's ids: read, change, delete, rotate, test, deliveries, redeliver",
      routes: [
        'GET /api/v2/webhooks/endpoints/:id', 'HEAD /api/v2/webhooks/endpoints/:id', 'PATCH /api/v2/webhooks/endpoints/:id', 'DELETE /api/v2/webhooks/endpoints/:id',
        'POST /api/v2/webhooks/endpoints/:id/rotate-secret', 'POST /api/v2/webhooks/endpoints/:id/test',
        'GET /api/v2/webhooks/endpoints/:id/deliveries', 'HEAD /api/v2/webhooks/endpoints/:id/deliveries', 'POST /api/v2/webhooks/deliveries/:id/redeliver',
      ],
      probes: () => {
        const endpoint = (suffix: string, init: (m: string) => RequestInit = (m) => ({ method: m })) => (id: string, m: string) => v2(B.key, `/api/v2/webhooks/endpoints/${id}${suffix}`, init(m));
        const aEndpoint = () => A.endpoint.id as string;
        return [
          ...read("/api/v2/webhooks/endpoints/{A's}", endpoint(''), aEndpoint, () => randomUUID(), 404),
          ...read("PATCH /api/v2/webhooks/endpoints/{A's} {enabled: false, url}", endpoint('', () => jsonInit('PATCH', { enabled: false, url: 'https://b.example.com/steal' })), aEndpoint, () => randomUUID(), 404, ['PATCH']),
          ...read("DELETE /api/v2/webhooks/endpoints/{A's}", endpoint(''), aEndpoint, () => randomUUID(), 404, ['DELETE']),
          ...read("/api/v2/webhooks/endpoints/{A's}/rotate-secret", endpoint('/rotate-secret'), aEndpoint, () => randomUUID(), 404, ['POST']),
          ...read("/api/v2/webhooks/endpoints/{A's}/test", endpoint('/test'), aEndpoint, () => randomUUID(), 404, ['POST']),
          ...read("/api/v2/webhooks/endpoints/{A's}/deliveries", endpoint('/deliveries'), aEndpoint, () => randomUUID(), 404),
          ...read("/api/v2/webhooks/deliveries/{A's}/redeliver", (id, m) => v2(B.key, `/api/v2/webhooks/deliveries/${id}/redeliver`, { method: m }), () => A.delivery, () => randomUUID(), 404, ['POST']),
        ];
      },
    },
    {
      family: "v2 webhook endpoint list and creation (B vs a fresh account), and A's page cursor",
      routes: ['GET /api/v2/webhooks/endpoints', 'HEAD /api/v2/webhooks/endpoints', 'POST /api/v2/webhooks/endpoints'],
      probes: () => {
        const created = async (who: typeof B) => {
          const r = await v2(who.key, '/api/v2/webhooks/endpoints', jsonInit('POST', { url: 'https://hooks.example.com/alice' }));
          return { status: r.status, keys: Object.keys(r.body ?? {}).sort(), secretIsAs: r.body?.secret === A.endpoint.secret };
        };
        return [
          same('GET /api/v2/webhooks/endpoints (B vs a fresh account)', (who) => v2(who.key, '/api/v2/webhooks/endpoints?limit=100')),
          same('HEAD /api/v2/webhooks/endpoints', (who) => v2(who.key, '/api/v2/webhooks/endpoints', { method: 'HEAD' })),
          { what: "POST /api/v2/webhooks/endpoints with A's url", theirs: () => created(B), unknown: () => created(C), status: 201 },
          ...read("/api/v2/webhooks/endpoints?cursor=A's cursor", (c, m) => v2(B.key, `/api/v2/webhooks/endpoints?cursor=${encodeURIComponent(c)}`, { method: m }), () => A.endpointCursor, () => forge(A.endpointCursor), 400),
        ];
      },
    },
    {
      family: 'deployment surface: A\'s deployment id by path and by host',
      routes: ['GET /workflow', 'HEAD /workflow'],
      probes: () => {
        const ghost = 'ghost-app'; // as long as A's id, never created
        const byPath = (dep: string, path: string, init: RequestInit = {}) => call(`${deployApi.url}/deployment/${dep}${path}`, { ...init, headers: { ...bearer(B.key), ...(init.headers as Record<string, string>) } });
        return [
          ...read('/deployment/{A\'s}/workflow', (d, m) => byPath(d, '/workflow', { method: m }), () => A.deployment, () => ghost, 404),
          ...read('/deployment/{A\'s}/api/v2/jobs (submit the pinned workflow)', (d) => byPath(d, '/api/v2/jobs', jsonInit('POST', { workflow: pinned })), () => A.deployment, () => ghost, 404, ['POST']),
          ...read('/deployment/{A\'s}/api/v2/jobs/{A\'s deployment job}', (d, m) => byPath(d, `/api/v2/jobs/${A.deploymentJob}`, { method: m }), () => A.deployment, () => ghost, 404),
          ...read('host {A\'s}.deploy.test GET /workflow', (d) => callWithHost(`${deployApi.url}/workflow`, `${d}.deploy.test`, { headers: bearer(B.key) }), () => A.deployment, () => ghost, 404, ['GET']),
        ];
      },
    },
  ];

  it('covers every route the API serves (route table of the built app and the OpenAPI document)', async () => {
    // The dump boots the app on this stack's database: with the same catalog, or it would replace it.
    const dumped = await dumpRoutes(stack.env(routerEnv));
    const doc = (await call(`${api}/openapi.json`)).body as { paths: Record<string, Record<string, unknown>> };
    const served = new Set<string>(dumped.map((r) => `${r.method} ${shape(r.url)}`));
    for (const [path, item] of Object.entries(doc.paths)) for (const method of Object.keys(item)) if (['get', 'head', 'post', 'put', 'patch', 'delete'].includes(method)) served.add(`${method.toUpperCase()} ${shape(path)}`);
    const covered = new Set([...rows.flatMap((r) => r.routes), ...Object.keys(NOT_TENANT_SCOPED)].map(shape));
    const missing = [...served].filter((r) => !covered.has(r)).sort();
    const stale = [...covered].filter((r) => !served.has(r)).sort();
    report.record({
      tried: 'routes of the built API (Fastify route table) and of /openapi.json against the table',
      count: served.size,
      outcome: `${rows.length} rows cover ${served.size - Object.keys(NOT_TENANT_SCOPED).length} tenant routes; ${Object.keys(NOT_TENANT_SCOPED).length} not tenant-scoped; uncovered: ${missing.length ? missing.join(', ') : 'none'}`,
      held: missing.length === 0,
    });
    expect({ missing, stale }).toEqual({ missing: [], stale: [] });
  }, 60_000);

  it.each(rows.map((r, i) => [r.family, r, i] as const))('%s', async (_family, row, i) => {
    // A fresh B for every row: what one row makes B create must not show in another row's lists.
    B = await fresh(`bob-${i}`, true);
    const probes = await row.probes();
    const results: { what: string; theirs: any; unknown: any; held: boolean }[] = [];
    for (const p of probes) {
      const theirs = await p.theirs();
      const unknown = await p.unknown();
      const statusOk = p.status === undefined || ((theirs as { status?: number }).status === p.status && (unknown as { status?: number }).status === p.status);
      results.push({ what: p.what, theirs, unknown, held: statusOk && JSON.stringify(theirs) === JSON.stringify(unknown) });
    }
    const failed = results.filter((r) => !r.held);
    const statuses = [...new Set(results.map((r) => (r.theirs as { status?: number }).status).filter((s) => s !== undefined))];
    report.record({
      tried: `B with A's ids: ${row.family}`,
      count: results.length,
      outcome: failed.length === 0 ? `same answer as for unknown ids (lists: as a fresh account's) on all ${results.length} probes (status ${statuses.join('/') || 'n/a'})` : `differs on ${failed.map((f) => f.what).join('; ')}`,
      held: failed.length === 0,
    });
    for (const r of results) expect({ what: r.what, answer: r.theirs }).toEqual({ what: r.what, answer: r.unknown });
    for (const [i, probe] of probes.entries()) {
      if (probe.status !== undefined) expect({ what: probe.what, status: (results[i]!.theirs as { status?: number }).status }).toEqual({ what: probe.what, status: probe.status });
    }
  }, 60_000);

  it("B's v1 prompt with A's prompt_id: refused as any id in use, and A's queued job keeps its secrets", async () => {
    B = await fresh('bob-prompt-id');
    const vault = new ExtraDataVault(redis, jobKeys(stack.redisPrefix), TEST_SIGNING_SECRET);
    expect(await vault.get(A.queued)).toEqual({ api_key_comfy_org: A.partnerKey });
    const prompt = { prompt: tinyImage(5), extra_data: { api_key_comfy_org: 'b-partner-key' } };
    const theirs = await v1(B.key, '/api/prompt', jsonInit('POST', { ...prompt, prompt_id: A.queued }));
    // B's own id in use answers the same: all that is learnt is that this UUID is taken.
    const own = await v1(B.key, '/api/prompt', jsonInit('POST', { prompt: tinyImage(6) }));
    const ownAgain = await v1(B.key, '/api/prompt', jsonInit('POST', { ...prompt, prompt_id: own.body.prompt_id }));
    const secrets = await vault.get(A.queued);
    const job = await stack.db.job.findUniqueOrThrow({ where: { id: A.queued } });
    const held = theirs.status === 400 && JSON.stringify(fingerprint(theirs, [A.queued])) === JSON.stringify(fingerprint(ownAgain, [own.body.prompt_id])) && secrets?.api_key_comfy_org === A.partnerKey && job.accountId === A.account.id;
    report.record({
      tried: "B submits a v1 prompt with A's prompt_id (and its own partner key)",
      count: 1,
      outcome: `${theirs.status}, the same answer as for B's own id in use (a client-chosen prompt_id is a global name); A's job and its sealed extra_data unchanged: ${secrets?.api_key_comfy_org === A.partnerKey}`,
      held,
    });
    expect(theirs.status).toBe(400);
    expect(fingerprint(theirs, [A.queued])).toEqual(fingerprint(ownAgain, [own.body.prompt_id]));
    expect(secrets).toEqual({ api_key_comfy_org: A.partnerKey });
    expect(job.accountId).toBe(A.account.id);
  });

  it("leaves all of A's data as it was: jobs not canceled, assets download, keys replay", async () => {
    const status = async (id: string) => (await v2(A.account.key, `/api/v2/jobs/${id}`)).body.status as string;
    const download = async (assetId: string) => {
      const r = await v2(A.account.key, `/api/v2/assets/${assetId}/content`);
      const got = r.status === 302 ? await fetch(r.headers.get('location')!) : null;
      return got ? Buffer.from(await got.arrayBuffer()) : null;
    };
    const view = await v1(A.account.key, `/api/view?filename=${A.v1Name}&type=input`);
    const viewBytes = view.status === 302 ? Buffer.from(await (await fetch(view.headers.get('location')!)).arrayBuffer()) : null;
    const replay = await v2(A.account.key, '/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(78) }, { 'idempotency-key': A.idemKey }));
    const routerReplay = await router(A.token, '/v1/models/openai/gpt-image-1', { method: 'POST', body: JSON.stringify(A.routerBody), headers: { 'idempotency-key': A.routerKey } });
    const deployment = await call(`${deployApi.url}/deployment/${A.deployment}/workflow`, { headers: bearer(A.account.key) });
    const list = (await v2(A.account.key, '/api/v2/jobs?limit=100')).body.data.map((j: { id: string }) => j.id);
    const history = Object.keys((await v1(A.account.key, '/api/history')).body);
    const output = await download(A.outputAsset);
    const userFile = await v1(A.account.key, `/api/userdata/${encodeURIComponent(A.userFile)}`);
    const settings = (await v1(A.account.key, '/api/settings')).body;
    const log = (await v1(A.account.key, '/api/internal/logs/raw')).body.entries.length;
    const endpoint = (await v2(A.account.key, `/api/v2/webhooks/endpoints/${A.endpoint.id}`)).body;
    const deliveries = (await v2(A.account.key, `/api/v2/webhooks/endpoints/${A.endpoint.id}/deliveries`)).body.data;
    const checks = {
      running: await status(A.running),
      queued: await status(A.queued),
      done: await status(A.done.id),
      uploadIntact: (await download(A.upload.id))?.equals(A.uploadBytes) ?? false,
      outputDownloads: output !== null && output.length === A.done.outputs[0].size_bytes,
      v1UploadIntact: viewBytes?.equals(A.v1Bytes) ?? false,
      idempotentReplay: `${replay.status} ${replay.body.error?.code} ${replay.body.error?.details?.job_id === A.idemJob}`,
      routerReplay: `${routerReplay.status} ${routerReplay.headers.get('idempotent-replayed')} ${routerReplay.text === A.routerResult}`,
      deployment: deployment.status,
      jobList: JSON.stringify(list) === JSON.stringify(A.jobIds),
      v1History: history.includes(A.done.id),
      userFile: `${userFile.status} ${userFile.text === A.userFileText}`,
      settings: JSON.stringify(settings) === JSON.stringify(A.settings),
      ownLog: log > 0,
      modelListed: ((await v1(A.account.key, '/api/models/loras')).body as string[]).includes(A.modelName),
      uploadResumable: (await v2(A.account.key, `/api/v2/uploads/${A.resumable}`, { method: 'HEAD', headers: { 'tus-resumable': '1.0.0' } })).headers.get('upload-offset'),
      webhookEndpoint: `${endpoint.enabled} ${endpoint.url} ${endpoint.updated_at === A.endpoint.updated_at}`,
      webhookSecret: (await stack.db.webhookEndpoint.findUniqueOrThrow({ where: { id: A.endpoint.id } })).previousSecretSealed === null,
      webhookDeliveries: deliveries.map((d: { id: string; attempts: number }) => `${d.id === A.delivery} ${d.attempts}`).join(),
    };
    const expected = {
      running: 'running',
      queued: 'queued',
      done: 'succeeded',
      uploadIntact: true,
      outputDownloads: true,
      v1UploadIntact: true,
      idempotentReplay: '422 idempotency_key_reuse true',
      routerReplay: '200 true true',
      deployment: 200,
      jobList: true,
      v1History: true,
      userFile: '200 true',
      settings: true,
      ownLog: true,
      modelListed: true,
      uploadResumable: '0',
      webhookEndpoint: 'true https://hooks.example.com/alice true',
      webhookSecret: true,
      webhookDeliveries: 'true 0',
    };
    const differs = Object.keys(expected).filter((k) => JSON.stringify(checks[k as keyof typeof checks]) !== JSON.stringify(expected[k as keyof typeof expected]));
    report.record({
      tried: "A's data after every probe of B (cancel, interrupt, queue delete/clear, history delete/clear, asset delete, key reuse)",
      count: Object.keys(expected).length,
      outcome: differs.length === 0 ? 'running job still running, queued still queued, assets and v1 upload download intact, A\'s job key still names A\'s job and the router key replays A\'s result, deployment, job list, v1 history and webhook endpoint (url, secret, delivery) unchanged' : `changed: ${differs.map((k) => `${k}=${JSON.stringify(checks[k as keyof typeof checks])}`).join(', ')}`,
      held: differs.length === 0,
    });
    expect(checks).toEqual(expected);
  }, 60_000);
});

/** The same cursor with one character of its signature changed: well-formed, never issued. */
function forge(cursor: string): string {
  const last = cursor.at(-1)!;
  return `${cursor.slice(0, -1)}${last === 'A' ? 'B' : 'A'}`;
}
