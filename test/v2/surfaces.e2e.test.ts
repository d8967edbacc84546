import { writeFileSync } from 'node:fs';
import { slowJob, startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, callWithHost, envelopeCode, jsonInit } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { SseClient, statusesOf } from '../support/sse.js';
import { TestStack } from '../support/stack.js';

/** Follows every link of a job as given, resolved against the origin only. */
async function followLinks(origin: string, job: { urls: Record<string, string> }, headers: Record<string, string>) {
  const self = await call(new URL(job.urls.self, origin).toString(), { headers });
  expect(self.status).toBe(200);
  const sse = new SseClient(new URL(job.urls.events, origin).toString(), headers);
  await sse.until((e) => statusesOf(e).some((s) => ['succeeded', 'failed', 'canceled'].includes(s)));
  sse.close();
  const cancel = await call(new URL(job.urls.cancel, origin).toString(), { method: 'POST', headers });
  expect(cancel.status).toBe(200);
  if (job.urls.logs) expect([200, 204]).toContain((await call(new URL(job.urls.logs, origin).toString(), { headers })).status);
  return self.body;
}

describe('surfaces', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack, { api: { BASE_PATH: '/comfy' } });
    alice = await stack.account({ name: 'alice' });
  });
  afterAll(() => stack.close());

  it('cloud under a mount prefix: routes and every link carry it', async () => {
    const origin = cloud.api.url;
    expect((await call(`${origin}/api/v2/jobs`, { headers: bearer(alice.key) })).status).toBe(404);
    const res = await call(`${origin}/comfy/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(1) }, bearer(alice.key, { prefer: 'wait=20' })));
    expect(res.status).toBe(201);
    for (const link of Object.values(res.body.urls) as string[]) expect(link.startsWith('/comfy/api/v2/jobs/')).toBe(true);
    const job = await followLinks(origin, res.body, bearer(alice.key));
    expect(job.status).toBe('succeeded');
    // Signed output URLs carry the prefix as well, and work without credentials.
    expect(new URL(job.outputs[0].url).pathname.startsWith('/comfy/blobs/')).toBe(true);
    expect((await fetch(job.outputs[0].url)).status).toBe(200);
  });

  describe('deployment', () => {
    let api: RunningProcess;
    const pinned = tinyImage(10);

    beforeAll(async () => {
      api = await stack.startApi({ SURFACE: 'deployment', DEPLOYMENT_DOMAIN: 'deploy.test' });
      const file = `/tmp/${stack.name}-pinned.json`;
      writeFileSync(file, JSON.stringify(pinned));
      const r = await stack.admin(['deployment', 'create', '--account', alice.id, '--id', 'my-app', '--workflow', file]);
      expect(r.code).toBe(0);
    });

    const submitTo = (path: string, workflow: unknown, headers: Record<string, string> = {}) =>
      call(`${api.url}${path}`, jsonInit('POST', { workflow }, bearer(alice.key, headers)));

    it('answers 429 deployment_not_ready while starting, then runs the pinned workflow with other values', async () => {
      const starting = await submitTo('/deployment/my-app/api/v2/jobs', pinned);
      expect(starting.status).toBe(429);
      expect(envelopeCode(starting)).toBe('deployment_not_ready');
      expect(starting.headers.get('retry-after')).toBeTruthy();
      expect((await stack.admin(['deployment', 'ready', '--id', 'my-app'])).code).toBe(0);

      const wf = await call(`${api.url}/deployment/my-app/workflow`, { headers: bearer(alice.key) });
      expect(wf.body).toEqual({ workflow: pinned, format: 'api' });

      const values = structuredClone(pinned);
      values['1'].inputs.color = 12345;
      const res = await submitTo('/deployment/my-app/api/v2/jobs', values, { prefer: 'wait=20' });
      expect(res.status).toBe(201);
      for (const link of Object.values(res.body.urls) as string[]) expect(link.startsWith('/deployment/my-app/api/v2/jobs/')).toBe(true);
      expect((await followLinks(api.url, res.body, bearer(alice.key))).status).toBe('succeeded');
    });

    it('is reached by host as well, with links that carry the gateway prefix', async () => {
      const res = await callWithHost(`${api.url}/api/v2/jobs`, 'my-app.deploy.test', {
        method: 'POST',
        headers: bearer(alice.key, { 'content-type': 'application/json' }),
        body: JSON.stringify({ workflow: pinned }),
      });
      expect(res.status).toBe(201);
      expect(res.body.urls.self).toBe(`/deployment/my-app/api/v2/jobs/${res.body.id}`);
      const viaHost = await callWithHost(`${api.url}/api/v2/jobs/${res.body.id}`, 'my-app.deploy.test', { headers: bearer(alice.key) });
      expect(viaHost.status).toBe(200);
    });

    it('refuses a different structure with 422 invalid_workflow', async () => {
      const extraNode = { ...structuredClone(pinned), '3': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } } };
      const otherClass = structuredClone(pinned);
      otherClass['2'].class_type = 'PreviewImage';
      const relinked = structuredClone(pinned);
      relinked['2'].inputs.images = ['1', 1];
      for (const wf of [extraNode, otherClass, relinked]) {
        const res = await submitTo('/deployment/my-app/api/v2/jobs', wf);
        expect(res.status).toBe(422);
        expect(envelopeCode(res)).toBe('invalid_workflow');
        expect(Object.keys(res.body.error.details.node_errors).length).toBeGreaterThan(0);
      }
    });

    it('keeps other accounts and unknown deployments out, and stops', async () => {
      const bob = await stack.account({ name: 'bob' });
      const theirs = await call(`${api.url}/deployment/my-app/api/v2/jobs`, jsonInit('POST', { workflow: pinned }, bearer(bob.key)));
      expect(theirs.status).toBe(404);
      const none = await submitTo('/deployment/no-such-app/api/v2/jobs', pinned);
      expect(none.status).toBe(404);
      expect((await submitTo('/api/v2/jobs', pinned)).status).toBe(404);
      const key = { 'idempotency-key': `before-stop-${stack.name}` };
      const kept = await submitTo('/deployment/my-app/api/v2/jobs', pinned, key);
      expect(kept.status).toBe(201);
      expect((await stack.admin(['deployment', 'stop', '--id', 'my-app'])).code).toBe(0);
      const stopped = await submitTo('/deployment/my-app/api/v2/jobs', pinned);
      expect(stopped.status).toBe(422);
      expect(envelopeCode(stopped)).toBe('deployment_stopped');
      // A retry of a submission made before the stop still finds its job: the stop concerns new ones.
      const retried = await submitTo('/deployment/my-app/api/v2/jobs', pinned, key);
      expect(retried.status).toBe(422);
      expect(envelopeCode(retried)).toBe('idempotency_key_reuse');
      expect(retried.body.error.details.job_id).toBe(kept.body.id);
    });

    // Alice's deployments: d1 starting, d2 ready, d3 stopped, d4 ready; d2, d3 and d4 pin the same
    // workflow, so a body d2 takes passes their structure check. Plus a job of hers on the cloud.
    describe('job routes are scoped to the addressed deployment', () => {
      const d2Pinned = slowJob(4000, 21);
      const d1 = 'scope-starting';
      const d2 = 'scope-ready';
      const d3 = 'scope-stopped';
      const d4 = 'scope-other';
      const d2Jobs: string[] = [];
      let cloudJob: string;
      const headers = () => bearer(alice.key);
      const get = (path: string, init: RequestInit = {}) => call(`${api.url}${path}`, { ...init, headers: { ...headers(), ...(init.headers as Record<string, string>) } });
      /** Every job route of one job id under a prefix ('' for none), as [name, reply]. */
      const jobRoutes = async (prefix: string, id: string) => [
        ['get', await get(`${prefix}/api/v2/jobs/${id}`)],
        ['workflow', await get(`${prefix}/api/v2/jobs/${id}/workflow`)],
        ['events', await get(`${prefix}/api/v2/jobs/${id}/events`)],
        ['logs', await get(`${prefix}/api/v2/jobs/${id}/logs`)],
        ['cancel', await get(`${prefix}/api/v2/jobs/${id}/cancel`, { method: 'POST' })],
      ] as const;
      const answer = (r: { status: number; body: any }) => ({ status: r.status, code: r.body?.error?.code, message: r.body?.error?.message });

      beforeAll(async () => {
        const create = async (id: string, wf: unknown, then?: 'ready' | 'stop') => {
          const file = `/tmp/${stack.name}-${id}.json`;
          writeFileSync(file, JSON.stringify(wf));
          expect((await stack.admin(['deployment', 'create', '--account', alice.id, '--id', id, '--workflow', file])).code).toBe(0);
          if (then) expect((await stack.admin(['deployment', then, '--id', id])).code).toBe(0);
        };
        await create(d1, tinyImage(20));
        await create(d2, d2Pinned, 'ready');
        await create(d3, d2Pinned, 'stop');
        await create(d4, d2Pinned, 'ready');
        for (let i = 0; i < 2; i++) {
          const res = await submitTo(`/deployment/${d2}/api/v2/jobs`, d2Pinned);
          expect(res.status).toBe(201);
          d2Jobs.push(res.body.id);
        }
        const cloudRes = await call(`${cloud.api.url}/comfy/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(22) }, bearer(alice.key)));
        expect(cloudRes.status).toBe(201);
        cloudJob = cloudRes.body.id;
      });

      afterAll(async () => {
        // The slow jobs would hold the one worker the later tests share.
        for (const id of d2Jobs) await get(`/deployment/${d2}/api/v2/jobs/${id}/cancel`, { method: 'POST' });
      });

      it('an unknown deployment answers every job route as submit does', async () => {
        const unknownSubmit = answer(await submitTo('/deployment/zz/api/v2/jobs', d2Pinned));
        expect(unknownSubmit.status).toBe(404);
        expect((await get('/deployment/zz/workflow')).status).toBe(404);
        for (const [route, r] of await jobRoutes('/deployment/zz', d2Jobs[0]!)) expect({ route, ...answer(r) }).toEqual({ route, ...unknownSubmit });
        expect({ route: 'list', ...answer(await get('/deployment/zz/api/v2/jobs?limit=100')) }).toEqual({ route: 'list', ...unknownSubmit });
      });

      it('with no deployment in host or path, every job route answers as submit does', async () => {
        const noneSubmit = answer(await submitTo('/api/v2/jobs', d2Pinned));
        expect(noneSubmit.status).toBe(404);
        for (const [route, r] of await jobRoutes('', d2Jobs[0]!)) expect({ route, ...answer(r) }).toEqual({ route, ...noneSubmit });
        expect({ route: 'list', ...answer(await get('/api/v2/jobs?limit=100')) }).toEqual({ route: 'list', ...noneSubmit });
      });

      it("another deployment's job and a cloud job answer 404 exactly as an unknown id, by path and by host", async () => {
        const unknownId = answer(await get(`/deployment/${d1}/api/v2/jobs/00000000-0000-4000-8000-000000000000`));
        expect(unknownId.status).toBe(404);
        for (const [prefix, id] of [[`/deployment/${d1}`, d2Jobs[0]!], [`/deployment/${d4}`, d2Jobs[0]!], [`/deployment/${d2}`, cloudJob]] as const) {
          for (const [route, r] of await jobRoutes(prefix, id)) expect({ prefix, route, ...answer(r) }).toEqual({ prefix, route, ...unknownId });
        }
        const byHost = await callWithHost(`${api.url}/api/v2/jobs/${d2Jobs[0]}`, `${d1}.deploy.test`, { headers: headers() });
        expect(answer(byHost)).toEqual(unknownId);
        // Its own deployment still reads it, by path and by host, with its own links.
        const own = await get(`/deployment/${d2}/api/v2/jobs/${d2Jobs[0]}`);
        expect(own.status).toBe(200);
        expect(own.body.urls.self).toBe(`/deployment/${d2}/api/v2/jobs/${d2Jobs[0]}`);
        expect((await callWithHost(`${api.url}/api/v2/jobs/${d2Jobs[0]}`, `${d2}.deploy.test`, { headers: headers() })).status).toBe(200);
        expect((await get(`/deployment/${d2}/api/v2/jobs/${d2Jobs[0]}/workflow`)).body.workflow).toEqual(d2Pinned);
        // The cloud surface is unchanged: it sees every job of the account.
        expect((await call(`${cloud.api.url}/comfy/api/v2/jobs/${d2Jobs[0]}`, { headers: headers() })).status).toBe(200);
      });

      it("lists only the addressed deployment's jobs", async () => {
        const starting = await get(`/deployment/${d1}/api/v2/jobs?limit=100`);
        expect(starting.status).toBe(200);
        expect(starting.body.data).toEqual([]);
        const ready = await get(`/deployment/${d2}/api/v2/jobs?limit=100`);
        expect(ready.status).toBe(200);
        expect(ready.body.data.map((j: { id: string }) => j.id).sort()).toEqual([...d2Jobs].sort());
        for (const job of ready.body.data) expect(job.urls.self).toBe(`/deployment/${d2}/api/v2/jobs/${job.id}`);
        const byHost = await callWithHost(`${api.url}/api/v2/jobs?limit=100`, `${d4}.deploy.test`, { headers: headers() });
        expect(byHost.body.data).toEqual([]);
      });

      it("does not cancel another deployment's job", async () => {
        const through = await get(`/deployment/${d1}/api/v2/jobs/${d2Jobs[1]}/cancel`, { method: 'POST' });
        expect(through.status).toBe(404);
        const after = await get(`/deployment/${d2}/api/v2/jobs/${d2Jobs[1]}`);
        expect(['queued', 'running', 'succeeded']).toContain(after.body.status);
        const own = await get(`/deployment/${d2}/api/v2/jobs/${d2Jobs[1]}/cancel`, { method: 'POST' });
        expect(own.status).toBe(200);
        expect(['canceling', 'canceled']).toContain(own.body.status);
      });

      it('a stopped or starting deployment answers so, rather than refuse a key used on another deployment', async () => {
        const key = { 'idempotency-key': `scope-${stack.name}` };
        const first = await submitTo(`/deployment/${d2}/api/v2/jobs`, d2Pinned, key);
        expect(first.status).toBe(201);
        d2Jobs.push(first.body.id);
        const again = await submitTo(`/deployment/${d2}/api/v2/jobs`, d2Pinned, key);
        expect(again.status).toBe(422);
        expect(envelopeCode(again)).toBe('idempotency_key_reuse');
        expect(again.body.error.details.job_id).toBe(first.body.id);

        const stopped = await submitTo(`/deployment/${d3}/api/v2/jobs`, d2Pinned, key);
        expect(stopped.status).toBe(422);
        expect(envelopeCode(stopped)).toBe('deployment_stopped');
        const starting = await submitTo(`/deployment/${d1}/api/v2/jobs`, d2Pinned, key);
        expect(starting.status).toBe(429);
        expect(envelopeCode(starting)).toBe('deployment_not_ready');
        expect((await submitTo('/deployment/zz/api/v2/jobs', d2Pinned, key)).status).toBe(404);
      });

      it('names a key job only on the deployment that used it: on another one or on the cloud it is a reused key, no job named', async () => {
        const key = { 'idempotency-key': `scope-elsewhere-${stack.name}` };
        const first = await submitTo(`/deployment/${d2}/api/v2/jobs`, d2Pinned, key);
        expect(first.status).toBe(201);
        d2Jobs.push(first.body.id);
        const other = await submitTo(`/deployment/${d4}/api/v2/jobs`, d2Pinned, key);
        expect(other.status).toBe(422);
        expect(envelopeCode(other)).toBe('idempotency_key_reuse');
        expect(other.body.error.details ?? null).toBeNull();
        const onCloud = await call(`${cloud.api.url}/comfy/api/v2/jobs`, jsonInit('POST', { workflow: d2Pinned }, bearer(alice.key, key)));
        expect(onCloud.status).toBe(422);
        expect(envelopeCode(onCloud)).toBe('idempotency_key_reuse');

        // And the other way: a key first used on the cloud is not replayed through a deployment.
        const cloudKey = { 'idempotency-key': `scope-cloud-${stack.name}` };
        const cloudFirst = await call(`${cloud.api.url}/comfy/api/v2/jobs`, jsonInit('POST', { workflow: d2Pinned }, bearer(alice.key, cloudKey)));
        expect(cloudFirst.status).toBe(201);
        await call(`${cloud.api.url}/comfy/api/v2/jobs/${cloudFirst.body.id}/cancel`, { method: 'POST', headers: headers() });
        const viaDeployment = await submitTo(`/deployment/${d2}/api/v2/jobs`, d2Pinned, cloudKey);
        expect(viaDeployment.status).toBe(422);
        expect(envelopeCode(viaDeployment)).toBe('idempotency_key_reuse');
      });
    });
  });

  it('self-hosted: no credentials by default, links followed as given, content streamed', async () => {
    const api = await stack.startApi({ SURFACE: 'self-hosted', API_PORT: '0' });
    const res = await call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(77) }, { prefer: 'wait=20' }));
    expect(res.status).toBe(201);
    const job = await followLinks(api.url, res.body, {});
    expect(job.status).toBe('succeeded');
    const content = await fetch(`${api.url}/api/v2/assets/${job.outputs[0].id}/content`);
    expect(content.status).toBe(200);
    expect(Buffer.from(await content.arrayBuffer()).subarray(1, 4).toString()).toBe('PNG');
    const guarded = await stack.startApi({ SURFACE: 'self-hosted', API_PORT: '0', SELF_HOSTED_TOKEN: 'static-token-123' });
    expect((await call(`${guarded.url}/api/v2/jobs/${res.body.id}`)).status).toBe(401);
    expect((await call(`${guarded.url}/api/v2/jobs/${res.body.id}`, { headers: bearer('static-token-123') })).status).toBe(200);
  });
});
