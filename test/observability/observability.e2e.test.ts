import { createServer } from 'node:net';
import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, envelopeCode, jsonInit, uploadForm } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { SseClient, statusesOf } from '../support/sse.js';
import { TEST_SIGNING_SECRET, TestStack } from '../support/stack.js';

const OPERATOR_TOKEN = 'operator-token-for-tests-0123456789';
const PARTNER_KEY = 'partner-key-9f8e7d6c5b4a39281706f5e4d3c2b1a0';

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `name{labels} value` samples of a Prometheus text exposition. */
function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    out.push({ labels, value: Number(m[3]) });
  }
  return out;
}

const jsonLines = (proc: RunningProcess) =>
  proc.output.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

describe('observability: metrics, logs, probes, queue dashboard', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };
  let jobId: string;

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack, {
      api: { LOG_LEVEL: 'debug', OPERATOR_TOKEN, SSE_KEEPALIVE_MS: '300' },
      worker: { LOG_LEVEL: 'debug' },
    });
    alice = await stack.account({ name: 'alice' });

    // A full job: an output of one job is uploaded as an asset and used by a second job that
    // carries a partner key; its events are watched and its output downloaded.
    const first = await call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(7) }, bearer(alice.key, { prefer: 'wait=20' })));
    expect(first.body.status).toBe('succeeded');
    const png = Buffer.from(await (await fetch(first.body.outputs[0].url)).arrayBuffer());
    const asset = await call(`${cloud.api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: uploadForm(png, 'input.png') });
    expect([200, 201]).toContain(asset.status);
    const workflow = {
      '1': { class_type: 'LoadImage', inputs: { image: { __type: 'core/ASSET', info: { id: asset.body.id, file_path: 'input.png' } } } },
      '2': { class_type: 'ImageInvert', inputs: { image: ['1', 0] } },
      '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'inverted' } },
    };
    const submitted = await call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow, extra_data: { api_key_comfy_org: PARTNER_KEY } }, bearer(alice.key)));
    expect(submitted.status).toBe(201);
    jobId = submitted.body.id;
    const sse = new SseClient(new URL(submitted.body.urls.events, cloud.api.url).toString(), bearer(alice.key));
    await sse.until((events) => statusesOf(events).includes('succeeded'));
    await sse.ended;
    const job = await call(`${cloud.api.url}/api/v2/jobs/${jobId}`, { headers: bearer(alice.key) });
    expect(job.body.status).toBe('succeeded');
    const download = await call(`${cloud.api.url}/api/v2/assets/${job.body.outputs[0].id}/content`, { headers: bearer(alice.key) });
    expect(download.status).toBe(302);
    expect((await fetch(download.headers.get('location')!)).status).toBe(200);
    // An error on a job route, for the request logs.
    expect((await call(`${cloud.api.url}/api/v2/jobs/${jobId}/cancel`, { method: 'POST' })).status).toBe(401);
  }, 90_000);
  afterAll(() => stack.close());

  describe('metrics', () => {
    it('api: HTTP latency by route template and status, jobs by state, queue depth', async () => {
      const res = await call(`${cloud.api.url}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      const http = samples(res.text, 'http_request_duration_seconds_count');
      expect(http).toContainEqual({ labels: { method: 'POST', route: '/api/v2/jobs', status_code: '201' }, value: expect.any(Number) });
      expect(http.find((s) => s.labels.route === '/api/v2/jobs/:id' && s.labels.status_code === '200')?.value).toBeGreaterThanOrEqual(1);
      expect(http.find((s) => s.labels.route === '/api/v2/jobs/:id/cancel' && s.labels.status_code === '401')?.value).toBe(1);
      // Route templates only: no raw ids in label values.
      expect(http.some((s) => s.labels.route!.includes(jobId))).toBe(false);
      expect(samples(res.text, 'jobs_total')).toContainEqual({ labels: { status: 'succeeded' }, value: 2 });
      expect(samples(res.text, 'jobs_total').map((s) => s.labels.status).sort()).toEqual(['canceled', 'canceling', 'expired', 'failed', 'queued', 'running', 'succeeded']);
      expect(samples(res.text, 'queue_depth')).toEqual([{ labels: {}, value: 0 }]);
      expect(res.text).toContain('# TYPE router_calls_total counter');
      expect(res.text).toContain('# TYPE router_inflight_spend_cents gauge');
    });

    it('worker: queue wait, execution time by status, engine readiness, output bytes', async () => {
      const worker = cloud.workers[0]!;
      const res = await call(`${worker.url}/metrics`);
      expect(res.status).toBe(200);
      expect(samples(res.text, 'queue_wait_seconds_count')[0]!.value).toBe(2);
      expect(samples(res.text, 'job_execution_seconds_count')).toContainEqual({ labels: { status: 'succeeded' }, value: 2 });
      expect(samples(res.text, 'engine_ready')).toEqual([{ labels: { worker_id: `w1-${stack.name}` }, value: 1 }]);
      expect(samples(res.text, 'output_bytes_stored_total')[0]!.value).toBeGreaterThan(0);
      // The api's families stay on the api.
      expect(res.text).not.toContain('http_request_duration_seconds');
    });

    it('counts a job that waits in the queue', async () => {
      const api = await stack.startApi({ OPERATOR_TOKEN: '' });
      const bob = await stack.account({ name: 'bob' });
      // A workflow no worker will take soon: the only worker is busy with a slow job.
      const slow = { '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } }, '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms: 3000 } }, '3': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 's' } } };
      const a = await call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: slow }, bearer(bob.key)));
      const b = await call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(9) }, bearer(bob.key)));
      let depth = 0;
      for (let i = 0; i < 40 && depth === 0; i++) {
        depth = samples((await call(`${api.url}/metrics`)).text, 'queue_depth')[0]!.value;
        if (depth === 0) await new Promise((r) => setTimeout(r, 100));
      }
      expect(depth).toBeGreaterThanOrEqual(1);
      await call(`${api.url}/api/v2/jobs/${a.body.id}/cancel`, { method: 'POST', headers: bearer(bob.key) });
      await call(`${api.url}/api/v2/jobs/${b.body.id}/cancel`, { method: 'POST', headers: bearer(bob.key) });
    });
  });

  describe('logs', () => {
    it('never contain the API key, the partner key or the signing secret, in any process', () => {
      const processes = [cloud.api, ...cloud.workers, ...cloud.engines];
      expect(processes.reduce((n, p) => n + p.output.length, 0)).toBeGreaterThan(10);
      for (const proc of processes) {
        for (const line of proc.output) {
          expect(line).not.toContain(alice.key);
          expect(line).not.toContain(PARTNER_KEY);
          expect(line).not.toContain(TEST_SIGNING_SECRET);
        }
      }
    });

    it('worker: JSON lines, and every line about the job carries its job_id', () => {
      const worker = cloud.workers[0]!;
      const lines = jsonLines(worker);
      expect(lines.every((l) => typeof l.level === 'number' && typeof l.msg === 'string' && typeof l.time === 'number' && l.worker_id === `w1-${stack.name}`)).toBe(true);
      const about = lines.filter((l) => JSON.stringify(l).includes(jobId));
      expect(about.map((l) => l.msg)).toEqual(expect.arrayContaining(['job started', 'submitting prompt to the engine', 'job finished']));
      for (const line of about) expect(line.job_id).toBe(jobId);
      expect(about.find((l) => l.msg === 'job finished')).toMatchObject({ status: 'succeeded', execution_ms: expect.any(Number) });
    });

    it('api: JSON lines with request_id, and job_id on every line of a request about the job', () => {
      const lines = jsonLines(cloud.api).filter((l) => l.msg === 'request completed');
      expect(lines.length).toBeGreaterThan(5);
      for (const line of lines) expect(line.request_id).toEqual(expect.any(String));
      const about = lines.filter((l) => String(l.url).includes(jobId));
      expect(about.map((l) => l.route)).toEqual(expect.arrayContaining(['/api/v2/jobs/:id', '/api/v2/jobs/:id/events', '/api/v2/jobs/:id/cancel']));
      for (const line of about) expect(line.job_id).toBe(jobId);
      expect(lines.find((l) => l.route === '/api/v2/jobs' && l.method === 'POST')?.job_id).toBeUndefined();
    });
  });

  describe('probes', () => {
    it('api: /healthz alive, /readyz checks PostgreSQL, Redis, storage and load', async () => {
      expect((await call(`${cloud.api.url}/healthz`)).body).toEqual({ status: 'ok' });
      const ready = await call(`${cloud.api.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', storage: 'ok', load: 'ok' } });
    });

    it('worker: /healthz alive, /readyz checks engine, PostgreSQL, Redis and storage', async () => {
      const worker = cloud.workers[0]!;
      expect((await call(`${worker.url}/healthz`)).body).toEqual({ status: 'ok' });
      const ready = await call(`${worker.url}/readyz`);
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({ status: 'ready', checks: { engine: 'ok', postgres: 'ok', redis: 'ok', storage: 'ok' } });
    });

    it('worker whose engine is unreachable: alive (200) but not ready (503), engine_ready 0', async () => {
      const workerId = `lonely-${stack.name}`;
      const worker = await stack.start('apps/worker/src/main.js', { ENGINE_URL: `http://127.0.0.1:${await closedPort()}`, WORKER_PORT: '0', WORKER_ID: workerId });
      expect((await call(`${worker.url}/healthz`)).status).toBe(200);
      const ready = await call(`${worker.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.body.status).toBe('not_ready');
      expect(ready.body.checks.engine).toMatch(/^error/);
      expect(ready.body.checks.postgres).toBe('ok');
      const metrics = await call(`${worker.url}/metrics`);
      expect(samples(metrics.text, 'engine_ready')).toEqual([{ labels: { worker_id: workerId }, value: 0 }]);
      await worker.stop();
    });

    it('api whose storage is unreachable: alive (200) but not ready (503)', async () => {
      const api = await stack.startApi({ STORAGE_DRIVER: 's3', S3_ENDPOINT: `http://127.0.0.1:${await closedPort()}`, S3_ACCESS_KEY_ID: 'x', S3_SECRET_ACCESS_KEY: 'y' });
      expect((await call(`${api.url}/healthz`)).status).toBe(200);
      const ready = await call(`${api.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.body.checks).toMatchObject({ postgres: 'ok', redis: 'ok', storage: expect.stringMatching(/^error/) });
      await api.stop();
    });
  });

  describe('queue dashboard (bull-board) at /admin/queues', () => {
    const dash = () => `${cloud.api.url}/admin/queues`;

    it('answers 401 in the ErrorEnvelope without the operator token, or with a wrong one', async () => {
      for (const init of [{}, { headers: bearer('wrong') }, { headers: bearer(alice.key) }, { headers: { cookie: 'cc_operator=00' } }]) {
        const res = await call(dash(), init);
        expect(res.status).toBe(401);
        expect(envelopeCode(res)).toBe('unauthorized');
        const api = await call(`${dash()}/api/queues`, init);
        expect(api.status).toBe(401);
      }
      expect((await call(`${dash()}?token=wrong`)).status).toBe(401);
    });

    it('serves the board and its API with Authorization: Bearer <OPERATOR_TOKEN>', async () => {
      const page = await call(dash(), { headers: bearer(OPERATOR_TOKEN) });
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/text\/html/);
      const queues = await call(`${dash()}/api/queues`, { headers: bearer(OPERATOR_TOKEN) });
      expect(queues.status).toBe(200);
      expect(queues.body.queues.map((q: { name: string }) => q.name)).toEqual(['engine-jobs']);
      expect(queues.body.queues[0].readOnlyMode).toBe(true);
    });

    it('lets a browser in with ?token= once: a cookie, and a redirect that drops the token', async () => {
      const first = await call(`${dash()}?token=${OPERATOR_TOKEN}`);
      expect(first.status).toBe(303);
      expect(first.headers.get('location')).toBe('/admin/queues');
      const cookie = first.headers.get('set-cookie')!;
      expect(cookie).toMatch(/^cc_operator=[0-9a-f]{64}; Path=\/admin\/queues; HttpOnly; SameSite=Strict/);
      expect(cookie).not.toContain(OPERATOR_TOKEN);
      const session = cookie.split(';')[0]!;
      expect((await call(dash(), { headers: { cookie: session } })).status).toBe(200);
      expect((await call(`${dash()}/api/queues`, { headers: { cookie: `other=1; ${session}` } })).status).toBe(200);
    });

    it('never logs the operator token, even when it came in the query string', () => {
      const seen = cloud.api.output.filter((l) => l.includes('/admin/queues?token='));
      expect(seen.length).toBeGreaterThan(0);
      for (const line of cloud.api.output) expect(line).not.toContain(OPERATOR_TOKEN);
    });

    it('is not mounted (404) when OPERATOR_TOKEN is empty', async () => {
      const api = await stack.startApi();
      const res = await call(`${api.url}/admin/queues`, { headers: bearer('') });
      expect(res.status).toBe(404);
      expect(envelopeCode(res)).toBe('not_found');
      await api.stop();
    });
  });
});
