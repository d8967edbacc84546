import { writeFileSync } from 'node:fs';
import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
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
      expect((await stack.admin(['deployment', 'stop', '--id', 'my-app'])).code).toBe(0);
      const stopped = await submitTo('/deployment/my-app/api/v2/jobs', pinned);
      expect(stopped.status).toBe(422);
      expect(envelopeCode(stopped)).toBe('deployment_stopped');
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
