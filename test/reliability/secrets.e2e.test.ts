import { createHash, randomBytes, randomUUID } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { mintRouterToken } from '#libs/auth';
import { openExtraData, jobKeys } from '#libs/jobs';
import { slowJob, tinyImage } from '../support/cloud.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { bearer, call, jsonInit, uploadForm, type Reply } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { SseClient } from '../support/sse.js';
import { TEST_ROUTER_SECRET, TEST_SIGNING_SECRET, TestStack } from '../support/stack.js';
import { startPartnerSim, type PartnerSim } from '../../apps/partner-sim/src/server.js';
import { writeCatalog } from '../router/router-world.js';
import { testPng } from '../v1/v1-world.js';

// Credentials stay where they belong. API keys rest only as hashes; partner keys of `extra_data`
// reach the engine and nothing else (no table, no Redis value in clear, no line of our logs);
// no URL the API hands out carries a credential; no error echoes the credential it refused.
// The api and worker log at trace level, so anything they might print is printed.

const report = new ReliabilityReport('Secrets', 6);
afterAll(() => report.save());

/** Where a secret was found, for the report: empty when nowhere. */
function findIn(haystacks: Record<string, string>, secrets: Record<string, string>): string[] {
  const found: string[] = [];
  for (const [name, secret] of Object.entries(secrets)) {
    // Bytes columns and buffers may hold it hex- or base64-encoded.
    const forms = [secret, Buffer.from(secret).toString('hex'), Buffer.from(secret).toString('base64')];
    for (const [where, text] of Object.entries(haystacks)) if (forms.some((f) => text.includes(f))) found.push(`${name} in ${where}`);
  }
  return found;
}

/** A TCP relay between the worker and the engine that keeps what the worker sent. */
async function relay(targetPort: number): Promise<{ port: number; sent: () => string; close: () => void }> {
  const chunks: Buffer[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    client.on('data', (d: Buffer) => chunks.push(d));
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    sent: () => Buffer.concat(chunks).toString('latin1'),
    close: () => server.close(),
  };
}

describe('secrets: keys hashed at rest, partner keys never persisted or logged, no credential in URLs or errors', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;
  let worker: RunningProcess;
  let engine: RunningProcess;
  let engineRelay: Awaited<ReturnType<typeof relay>>;
  let sim: PartnerSim;
  let redis: Redis;
  let account: { id: string; key: string };
  let secondKey: string;
  let revokedKey: string;
  let routerToken: string;

  // Partner credentials sent in extra_data, one per way of sending them.
  const partner = {
    v1ServiceOrg: `pk-v1svc-${randomUUID()}`,
    v1ComfyOrg: `pk-v1comfy-${randomUUID()}`,
    v1AuthToken: `tok-v1-${randomUUID()}`,
    v2: `pk-v2-${randomUUID()}`,
    v2Failing: `pk-v2fail-${randomUUID()}`,
    v1Invalid: `pk-v1bad-${randomUUID()}`,
    v2Invalid: `pk-v2bad-${randomUUID()}`,
  };
  const urls: { where: string; url: string }[] = [];
  /** Credentials the refusal test sent, searched for in the logs at the end. */
  const refused: Record<string, string> = {};
  const jobIds: string[] = [];
  let sealedWhileQueued: { key: string; opened: Record<string, unknown> | null; raw: string }[] = [];

  const v2 = (path: string, init: RequestInit = {}, key = account.key) => call(`${api.url}${path}`, { ...init, headers: { ...bearer(key), ...(init.headers as Record<string, string>) } });
  const v1 = (path: string, init: RequestInit = {}, key = account.key) => call(`${api.url}${path}`, { ...init, headers: { 'x-api-key': key, ...(init.headers as Record<string, string>) } });

  async function dumpDatabase(): Promise<Record<string, string>> {
    const tables = await stack.db.$queryRawUnsafe<{ table_name: string }[]>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
    const out: Record<string, string> = {};
    for (const { table_name: table } of tables) {
      const rows = await stack.db.$queryRawUnsafe<{ row: string }[]>(`SELECT t::text AS row FROM "${table}" t`);
      out[`table ${table}`] = rows.map((r) => r.row).join('\n');
    }
    return out;
  }

  async function dumpRedis(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${stack.redisPrefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        const type = await redis.type(key);
        let value: unknown = null;
        if (type === 'string') value = await redis.get(key);
        else if (type === 'hash') value = await redis.hgetall(key);
        else if (type === 'list') value = await redis.lrange(key, 0, -1);
        else if (type === 'set') value = await redis.smembers(key);
        else if (type === 'zset') value = await redis.zrange(key, 0, -1, 'WITHSCORES');
        else if (type === 'stream') value = await redis.xrange(key, '-', '+');
        out[`redis ${key}`] = JSON.stringify(value);
      }
    } while (cursor !== '0');
    return out;
  }

  const logs = () => ({ 'api log': api.output.join('\n'), 'worker log': worker.output.join('\n') });
  const apiKeys = () => ({
    'api key': account.key,
    'api key secret part': account.key.slice(13),
    'second api key': secondKey,
    'revoked api key': revokedKey,
  });

  beforeAll(async () => {
    await stack.open();
    redis = new Redis(TEST_REDIS_URL);
    sim = await startPartnerSim({ timeScale: 0.005 });
    engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '20' });
    engineRelay = await relay(engine.port);
    const trace = { LOG_LEVEL: 'trace' };
    worker = await stack.start('apps/worker/src/main.js', { ...trace, ENGINE_URL: `http://127.0.0.1:${engineRelay.port}`, WORKER_PORT: '0', WORKER_ID: 'w-secrets' }, 'ready');
    api = await stack.startApi({
      ...trace,
      // This suite sends many bad credentials on purpose; the brute-force guard has its own suite.
      AUTH_FAILURE_LIMIT: '0',
      ROUTER_CATALOG_FILE: writeCatalog(stack.blobDir),
      ...sim.routerEnv(),
    });
    account = await stack.account({ name: 'owner' });
    await stack.accounts.setLimits(account.id, { routerEnabled: true, routerMaxConcurrent: 8, routerSpendCapCents: 10_000, routerWindowCalls: 1000, routerWindowSeconds: 3600 });
    routerToken = await mintRouterToken(TEST_ROUTER_SECRET, account.id);
    const created = await stack.admin(['key', 'create', '--account', account.id, '--name', 'second']);
    secondKey = (JSON.parse(created.stdout) as { api_key: string }).api_key;
    const doomed = JSON.parse((await stack.admin(['key', 'create', '--account', account.id, '--name', 'doomed'])).stdout) as { api_key: string; key_id: string };
    revokedKey = doomed.api_key;
    expect((await v2('/api/v2/jobs', {}, revokedKey)).status).toBe(200);
    expect((await stack.admin(['key', 'revoke', '--key', doomed.key_id])).code).toBe(0);
  }, 60_000);

  afterAll(async () => {
    engineRelay?.close();
    redis?.disconnect();
    await sim?.stop();
    await stack.close();
  });

  it('runs jobs with partner keys: the engine gets them, Redis holds them only sealed while queued', async () => {
    // The one worker is busy for a moment, so the jobs below wait in the queue with their secrets.
    const blocker = await v2('/api/v2/jobs', jsonInit('POST', { workflow: slowJob(6_000) }));
    jobIds.push(blocker.body.id);
    await waitUntil(async () => (await v2(`/api/v2/jobs/${blocker.body.id}`)).body.status === 'running', 20_000, 'blocker running');

    const v1a = await v1('/api/prompt', jsonInit('POST', { prompt: tinyImage(1), extra_data: { api_key_service_org: partner.v1ServiceOrg, auth_token_comfy_org: partner.v1AuthToken } }));
    const v1b = await v1('/api/prompt', jsonInit('POST', { prompt: tinyImage(2), extra_data: { api_key_comfy_org: partner.v1ComfyOrg } }));
    const v2a = await v2('/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(3), extra_data: { api_key_comfy_org: partner.v2 } }, { 'idempotency-key': `k-${randomUUID()}` }), secondKey);
    const failing = {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
      '2': { class_type: 'SimFail', inputs: { source: ['1', 0], exception_type: 'RuntimeError', message: 'partner call failed' } },
    };
    const v2b = await v2('/api/v2/jobs', jsonInit('POST', { workflow: failing, extra_data: { api_key_comfy_org: partner.v2Failing } }));
    expect([v1a.status, v1b.status, v2a.status, v2b.status]).toEqual([200, 200, 201, 201]);
    const ids = [v1a.body.prompt_id, v1b.body.prompt_id, v2a.body.id, v2b.body.id] as string[];
    jobIds.push(...ids);

    const keys = jobKeys(stack.redisPrefix);
    sealedWhileQueued = await Promise.all(
      ids.map(async (id) => {
        const raw = (await redis.get(keys.extraData(id))) ?? '';
        return { key: keys.extraData(id), raw, opened: raw ? openExtraData(TEST_SIGNING_SECRET, raw) : null };
      }),
    );
    const queuedStatuses = await Promise.all(ids.map(async (id) => (await v2(`/api/v2/jobs/${id}`)).body.status as string));
    const redisWhileQueued = await dumpRedis();
    const inClear = findIn(redisWhileQueued, partner);

    await waitUntil(async () => {
      const statuses = await Promise.all(jobIds.map(async (id) => (await v2(`/api/v2/jobs/${id}`)).body.status as string));
      return statuses.every((s) => ['succeeded', 'failed'].includes(s));
    }, 40_000, 'jobs finished');
    const final = await Promise.all(ids.map(async (id) => (await v2(`/api/v2/jobs/${id}`)).body));
    const reachedEngine = findIn({ engine: engineRelay.sent() }, { v1ServiceOrg: partner.v1ServiceOrg, v1ComfyOrg: partner.v1ComfyOrg, v1AuthToken: partner.v1AuthToken, v2: partner.v2, v2Failing: partner.v2Failing });
    const vaultAfter = await Promise.all(ids.map((id) => redis.exists(keys.extraData(id))));

    const opened = sealedWhileQueued.map((s) => s.opened);
    const held = inClear.length === 0 && queuedStatuses.every((s) => s === 'queued') && opened.every((o) => o !== null) && reachedEngine.length === 5 && vaultAfter.every((n) => n === 0);
    report.record({
      tried: 'partner keys in extra_data (v1 api_key_service_org, api_key_comfy_org, auth_token_comfy_org; v2 api_key_comfy_org; a failing job) while queued and after',
      count: 5,
      outcome: `while queued: ${opened.filter(Boolean).length}/4 vault entries sealed (AES-256-GCM), ${inClear.length} in clear in ${Object.keys(redisWhileQueued).length} Redis keys; the engine received ${reachedEngine.length}/5; vault entries left after the jobs: ${vaultAfter.reduce((a, b) => a + b, 0)}`,
      held,
    });
    expect(queuedStatuses).toEqual(['queued', 'queued', 'queued', 'queued']);
    expect(opened).toEqual([
      { api_key_comfy_org: partner.v1ServiceOrg, auth_token_comfy_org: partner.v1AuthToken },
      { api_key_comfy_org: partner.v1ComfyOrg },
      { api_key_comfy_org: partner.v2 },
      { api_key_comfy_org: partner.v2Failing },
    ]);
    expect(inClear).toEqual([]);
    expect(reachedEngine.length).toBe(5);
    expect(final.map((j) => j.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'failed']);
    expect(vaultAfter).toEqual([0, 0, 0, 0]);
    for (const job of final) urls.push(...Object.entries(job.urls as Record<string, string>).map(([k, u]) => ({ where: `job.urls.${k}`, url: u })), ...job.outputs.map((o: { url: string }) => ({ where: 'job output url', url: o.url })));
  }, 90_000);

  it('refuses invalid submissions without echoing their partner keys', async () => {
    const badV1 = await v1('/api/prompt', jsonInit('POST', { prompt: { '1': { class_type: 'NoSuchNode', inputs: {} } }, extra_data: { api_key_comfy_org: partner.v1Invalid } }));
    const badV1Shape = await v1('/api/prompt', jsonInit('POST', { prompt: tinyImage(1), extra_data: { api_key_comfy_org: [partner.v1Invalid] } }));
    const badV2 = await v2('/api/v2/jobs', jsonInit('POST', { workflow: { '1': { class_type: 'NoSuchNode', inputs: {} } }, extra_data: { api_key_comfy_org: partner.v2Invalid } }));
    const badV2Key = await v2('/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(1), extra_data: { api_key_comfy_org: partner.v2Invalid, other: partner.v2Invalid } }));
    const answers = [badV1, badV1Shape, badV2, badV2Key];
    const echoed = findIn(Object.fromEntries(answers.map((a, i) => [`answer ${i + 1}`, a.text])), { v1Invalid: partner.v1Invalid, v2Invalid: partner.v2Invalid });
    report.record({
      tried: 'invalid v1 and v2 submissions carrying partner keys (bad workflow, bad extra_data)',
      count: answers.length,
      outcome: `${answers.map((a) => a.status).join(',')}; partner key echoed in ${echoed.length} answers`,
      held: echoed.length === 0 && answers.every((a) => a.status >= 400 && a.status < 500),
    });
    expect(answers.map((a) => a.status >= 400 && a.status < 500)).toEqual([true, true, true, true]);
    expect(echoed).toEqual([]);
  });

  it('hands out no URL that carries a credential', async () => {
    const upload = await v2('/api/v2/assets', { method: 'POST', body: uploadForm(randomBytes(100), 'in.bin') });
    urls.push({ where: 'asset url', url: upload.body.url });
    const content = await v2(`/api/v2/assets/${upload.body.id}/content`);
    urls.push({ where: 'asset content Location', url: content.headers.get('location') ?? '' });
    // A client that put its key in the query string as well: nothing of the request is echoed into links.
    const withQuery = await v2(`/api/v2/jobs/${jobIds[1]}?token=${account.key}&api_key=${account.key}`);
    urls.push(...Object.values(withQuery.body.urls as Record<string, string>).map((u) => ({ where: 'job urls (key in the query)', url: u })));
    const list = await v2('/api/v2/jobs?limit=100');
    for (const job of list.body.data) urls.push(...job.outputs.map((o: { url: string }) => ({ where: 'job list output url', url: o.url })));
    if (list.body.next_cursor) urls.push({ where: 'list cursor', url: list.body.next_cursor });
    const v1Upload = new FormData();
    v1Upload.append('image', new Blob([testPng(8, 8, 5)]), 'x.png');
    const uploaded = await v1('/api/upload/image', { method: 'POST', body: v1Upload });
    const view = await v1(`/api/view?filename=${uploaded.body.name}&type=input`);
    urls.push({ where: '/api/view Location', url: view.headers.get('location') ?? '' });
    const output = (await v2(`/api/v2/jobs/${jobIds[1]}`)).body.outputs[0] as { name: string };
    const outView = await v1(`/api/view?filename=${output.name}&subfolder=${jobIds[1]}&type=output`);
    urls.push({ where: '/api/view Location (output)', url: outView.headers.get('location') ?? '' });
    const sse = new SseClient(`${api.url}/api/v2/jobs/${jobIds[1]}/events`, bearer(account.key));
    await sse.until((events) => events.some((e) => e.event === 'status' && /succeeded/.test(e.data)));
    sse.close();
    for (const e of sse.events.filter((e) => e.event === 'output')) urls.push({ where: 'SSE output event url', url: (JSON.parse(e.data) as { url: string }).url });
    const detail = await call(`${api.url}/v1/models/openai/gpt-image-1`, { headers: { authorization: `Bearer ${routerToken}` } });
    if (detail.body.input_schema_url) urls.push({ where: 'router input_schema_url', url: detail.body.input_schema_url });
    const models = await call(`${api.url}/v1/models?limit=1`, { headers: { authorization: `Bearer ${routerToken}` } });
    urls.push({ where: 'router next_cursor', url: models.body.next_cursor });

    const credentials = { ...apiKeys(), 'router token': routerToken, 'signing secret': TEST_SIGNING_SECRET, 'router secret': TEST_ROUTER_SECRET, ...partner };
    const carrying = urls.flatMap(({ where, url }) => findIn({ [where]: url }, credentials));
    // Nor may a URL carry a credential-shaped parameter at all.
    const suspicious = urls.filter(({ url }) => /[?&](token|api_key|apikey|key|access_token|authorization)=/i.test(url) || /cck_[A-Za-z0-9]{8}_/.test(url) || /eyJ[\w-]+\.eyJ/.test(url));
    const params = [...new Set(urls.flatMap(({ url }) => (URL.canParse(url, api.url) ? [...new URL(url, api.url).searchParams.keys()] : [])))].sort();
    report.record({
      tried: 'every URL the API returned: job links, output and asset URLs, content and /api/view redirects, SSE output events, cursors',
      count: urls.length,
      outcome: `${carrying.length} carry a credential, ${suspicious.length} a credential-shaped parameter; query parameters seen: ${params.join(', ') || 'none'}`,
      held: carrying.length === 0 && suspicious.length === 0 && urls.length > 10,
    });
    expect(urls.length).toBeGreaterThan(10);
    expect(urls.filter((u) => !u.url)).toEqual([]);
    expect(carrying).toEqual([]);
    expect(suspicious).toEqual([]);
  }, 60_000);

  it('echoes no credential in any refusal', async () => {
    const wellFormedWrong = `cck_Abcdefgh_${randomBytes(32).toString('base64url')}`;
    const malformed = `not-a-key-${randomUUID()}`;
    const forgedJwt = await mintRouterToken('another-secret-0123456789-xyz', account.id);
    const expiredParts = routerToken.split('.');
    const tamperedJwt = `${expiredParts[0]}.${Buffer.from(JSON.stringify({ sub: account.id, exp: 1 })).toString('base64url')}.${expiredParts[2]}`;
    const nobodyJwt = await mintRouterToken(TEST_ROUTER_SECRET, randomUUID());
    const keys = { wellFormedWrong, malformed, revoked: revokedKey };
    Object.assign(refused, { 'refused wrong key': wellFormedWrong, 'refused malformed key': malformed, 'refused forged token': forgedJwt, 'refused tampered token': tamperedJwt, 'refused unknown-workspace token': nobodyJwt });
    const answers: { what: string; credential: string; reply: Reply | { status: number; text: string; headers: Headers } }[] = [];
    for (const [name, key] of Object.entries(keys)) {
      answers.push({ what: `v2 Bearer ${name}`, credential: key, reply: await call(`${api.url}/api/v2/jobs`, { headers: bearer(key) }) });
      answers.push({ what: `v2 Bearer ${name} (POST)`, credential: key, reply: await call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(1) }, bearer(key))) });
      answers.push({ what: `v1 X-API-Key ${name}`, credential: key, reply: await call(`${api.url}/api/queue`, { headers: { 'x-api-key': key } }) });
      answers.push({ what: `v1 prompt X-API-Key ${name}`, credential: key, reply: await call(`${api.url}/api/prompt`, jsonInit('POST', { prompt: tinyImage(1) }, { 'x-api-key': key })) });
      answers.push({ what: `WebSocket ?token= ${name}`, credential: key, reply: await upgrade(`/ws?clientId=c&token=${encodeURIComponent(key)}`, {}) });
      answers.push({ what: `WebSocket X-API-Key ${name}`, credential: key, reply: await upgrade('/ws?clientId=c', { 'x-api-key': key }) });
      answers.push({ what: `router with an API key ${name}`, credential: key, reply: await call(`${api.url}/v1/models`, { headers: bearer(key) }) });
    }
    // A valid key on the wrong surface, a router token on v2, and bad router tokens.
    answers.push({ what: 'router token as a v2 key', credential: routerToken, reply: await call(`${api.url}/api/v2/jobs`, { headers: bearer(routerToken) }) });
    // The router takes an account's own API key too (the console signs in with one); an unknown key is refused.
    const unknownKey = `cck_AAAAAAAA_${'A'.repeat(43)}`;
    answers.push({ what: 'unknown API key as a router credential', credential: unknownKey, reply: await call(`${api.url}/v1/models`, { headers: bearer(unknownKey) }) });
    for (const [name, token] of Object.entries({ forgedJwt, tamperedJwt, nobodyJwt })) {
      answers.push({ what: `router ${name}`, credential: token, reply: await call(`${api.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } }) });
      answers.push({ what: `router call ${name}`, credential: token, reply: await call(`${api.url}/v1/models/openai/gpt-image-1`, jsonInit('POST', { model: 'gpt-image-1', prompt: 'x' }, { authorization: `Bearer ${token}` })) });
    }
    const echoes = answers.filter(({ credential, reply }) => {
      const headers = [...reply.headers.entries()].map(([k, v]) => `${k}: ${v}`).join('\n');
      return findIn({ body: reply.text, headers }, { credential }).length > 0 || findIn({ body: reply.text, headers }, { secret: credential.slice(-20) }).length > 0;
    });
    const statuses = [...new Set(answers.map((a) => a.reply.status))].sort();
    report.record({
      tried: 'wrong, malformed and revoked API keys on v2, v1 and the WebSocket; forged, tampered and unknown-workspace router tokens; each credential on the other surface',
      count: answers.length,
      outcome: `statuses ${statuses.join('/')}; credential echoed in ${echoes.length} answers (bodies and headers)`,
      held: echoes.length === 0 && answers.every((a) => a.reply.status === 401),
    });
    expect(answers.filter((a) => a.reply.status !== 401).map((a) => `${a.what}: ${a.reply.status}`)).toEqual([]);
    expect(echoes.map((e) => e.what)).toEqual([]);
  }, 60_000);

  it('stores API keys only as hashes and partner keys, router tokens and refused credentials nowhere', async () => {
    // One router call, so a router token has been used for real too.
    expect((await call(`${api.url}/v1/models/openai/gpt-image-1`, jsonInit('POST', { model: 'gpt-image-1', prompt: 'a lighthouse' }, { authorization: `Bearer ${routerToken}` }))).status).toBe(200);
    const hashes = (await stack.db.apiKey.findMany({ where: { accountId: account.id } })).map((k) => k.hash).sort();
    const expectedHashes = [account.key, secondKey, revokedKey].map((k) => createHash('sha256').update(k).digest('hex')).sort();
    const database = await dumpDatabase();
    const redisNow = await dumpRedis();
    const stored = { ...database, ...redisNow };
    const secrets = { ...apiKeys(), 'router token': routerToken, ...partner };
    const atRest = findIn(stored, secrets);
    const logged = findIn(logs(), { ...secrets, ...refused });
    const logLines = api.output.length + worker.output.length;
    const engineSaw = findIn({ 'engine log': engine.output.join('\n') }, partner).length;
    report.record({
      tried: `every table (${Object.keys(database).length}) and Redis key (${Object.keys(redisNow).length}) searched for the API keys, the router token and the partner keys`,
      count: Object.keys(stored).length,
      outcome: `API keys stored as SHA-256 only (${hashes.length} keys); found at rest: ${atRest.length ? atRest.join(', ') : 'nothing'}`,
      held: atRest.length === 0 && JSON.stringify(hashes) === JSON.stringify(expectedHashes),
    });
    report.record({
      tried: `api and worker output at LOG_LEVEL=trace (${logLines} lines) searched for the same secrets and the refused credentials`,
      count: logLines,
      outcome: `found: ${logged.length ? logged.join(', ') : 'nothing'} (the engine's own output mentions ${engineSaw} partner keys; it is their destination)`,
      held: logged.length === 0 && logLines > 0,
    });
    expect(hashes).toEqual(expectedHashes);
    expect(atRest).toEqual([]);
    expect(logged).toEqual([]);
    expect(logLines).toBeGreaterThan(0);
  }, 60_000);

  /** A WebSocket upgrade's refusal: status, headers and body. */
  function upgrade(path: string, headers: Record<string, string>): Promise<{ status: number; text: string; headers: Headers }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${api.url.replace('http', 'ws')}${path}`, { headers });
      ws.on('unexpected-response', (_req, res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
          ws.terminate();
          resolve({ status: res.statusCode ?? 0, text, headers: h });
        });
      });
      ws.on('open', () => {
        ws.close();
        resolve({ status: 101, text: '', headers: new Headers() });
      });
      ws.on('error', (err) => {
        if (ws.readyState !== WebSocket.CLOSED) reject(err);
      });
    });
  }
});
