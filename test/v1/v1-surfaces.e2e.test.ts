import { request } from 'node:http';
import { tinyImage } from '../support/cloud.js';
import { bearer, call, callWithHost } from '../support/http.js';
import { V1World, sleeper, upgradeStatusOf } from './v1-world.js';

const TOKEN = 'static-token-123';

/** An HTTP status for a request that leaves from a chosen loopback address: its own brute-force count. */
function statusFrom(localAddress: string, url: string, headers: Record<string, string> = {}): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, localAddress }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('v1 on the self-hosted and deployment surfaces', () => {
  const world = new V1World();

  beforeAll(() => world.start({ SURFACE: 'self-hosted' }));
  afterAll(() => world.close());

  describe('self-hosted', () => {
    it('needs no credential without a static token: REST, prompt and /ws act as the local account', async () => {
      const socket = await world.socket(null, { clientId: 'local-client' });
      expect((await world.get(null, '/api/object_info/KSampler')).status).toBe(200);
      const id = await world.prompt(null, sleeper(1), { client_id: 'local-client' });
      await socket.ended(id);
      expect(socket.texts(id).map((m) => m.type)).toContain('execution_success');
      expect(await world.waitStatus(null, id, ['success'])).toBe('success');
      expect(Object.keys((await world.get(null, `/api/history/${id}`)).body)).toEqual([id]);
      // The same local account as v2 uses.
      expect((await call(`${world.url}/api/v2/jobs/${id}`)).body).toMatchObject({ id, status: 'succeeded' });
    });

    it('with a static token, takes it as X-API-Key, Authorization: Bearer or ?token=, and nothing else', async () => {
      const guarded = await world.otherApi({ SURFACE: 'self-hosted', SELF_HOSTED_TOKEN: TOKEN });
      const accountKey = (await world.account()).key;
      for (const key of [null, 'wrong-token', accountKey]) {
        const refused = await guarded.get(key, '/api/queue');
        expect([key, refused.status]).toEqual([key, 401]);
        expect(refused.body.error.code).toBe('unauthorized');
      }
      expect((await guarded.get(TOKEN, '/api/queue')).status).toBe(200);
      expect((await call(`${guarded.url}/api/queue`, { headers: bearer(TOKEN) })).status).toBe(200);
      const id = await guarded.prompt(TOKEN, sleeper(1));
      expect(await guarded.waitStatus(TOKEN, id, ['success'])).toBe('success');

      expect(await guarded.upgradeStatus('/ws?clientId=x')).toBe(401);
      expect(await guarded.upgradeStatus('/ws?clientId=x&token=wrong-token')).toBe(401);
      expect(await guarded.upgradeStatus(`/ws?clientId=x&token=${accountKey}`)).toBe(401);
      expect(await guarded.upgradeStatus(`/ws?clientId=x&token=${TOKEN}`)).toBe(101);
      expect(await guarded.upgradeStatus('/api/ws?clientId=x', { 'x-api-key': TOKEN })).toBe(101);
      expect(await guarded.upgradeStatus('/ws?clientId=x', bearer(TOKEN))).toBe(101);
    });

    it('counts wrong tokens against the address as v2 does, and never a request without one', async () => {
      const limited = await world.otherApi({ SURFACE: 'self-hosted', SELF_HOSTED_TOKEN: TOKEN, AUTH_FAILURE_LIMIT: '3' });
      const source = '127.0.0.41';
      const queue = `${limited.url}/api/queue`;
      const ws = `${limited.url.replace('http', 'ws')}/ws?clientId=x`;
      for (let n = 0; n < 4; n++) expect((await statusFrom(source, queue)).status).toBe(401);
      expect(await upgradeStatusOf(ws, { localAddress: source })).toBe(401);
      expect((await statusFrom(source, queue, { 'x-api-key': TOKEN })).status).toBe(200);

      // One wrong guess per way of presenting the token, then even the right one waits.
      expect((await statusFrom(source, queue, { 'x-api-key': 'wrong-token' })).status).toBe(401);
      expect((await statusFrom(source, queue, bearer('wrong-token'))).status).toBe(401);
      expect(await upgradeStatusOf(`${ws}&token=wrong-token`, { localAddress: source })).toBe(401);
      const blocked = await statusFrom(source, queue, { 'x-api-key': TOKEN });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.retryAfter)).toBeGreaterThan(0);
      expect(await upgradeStatusOf(`${ws}&token=${TOKEN}`, { localAddress: source })).toBe(429);
      // Other addresses are not held back.
      expect((await statusFrom('127.0.0.42', queue, { 'x-api-key': TOKEN })).status).toBe(200);
    });
  });

  describe('deployment', () => {
    const pinned = tinyImage(10);
    let dep: V1World;
    let alice: { id: string; key: string };

    beforeAll(async () => {
      dep = await world.otherApi({ SURFACE: 'deployment', DEPLOYMENT_DOMAIN: 'deploy.test' });
      alice = await world.account();
      await world.stack.db.deployment.create({ data: { id: 'my-app', accountId: alice.id, workflow: pinned } });
    });

    const setStatus = (status: 'ready' | 'stopped') => world.stack.db.deployment.update({ where: { id: 'my-app' }, data: { status } });

    it('answers 429 deployment_not_ready while starting, then runs the pinned prompt with other values', async () => {
      const starting = await dep.post(alice.key, '/deployment/my-app/api/prompt', { prompt: pinned });
      expect(starting.status).toBe(429);
      expect(starting.body.error.code).toBe('deployment_not_ready');
      expect(Number(starting.headers.get('retry-after'))).toBeGreaterThan(0);
      await setStatus('ready');

      const values = structuredClone(pinned);
      values['1'].inputs.color = 12345;
      const ok = await dep.post(alice.key, '/deployment/my-app/api/prompt', { prompt: values });
      expect(ok.status).toBe(200);
      expect(await dep.waitStatus(alice.key, ok.body.prompt_id, ['success'])).toBe('success');
      const job = await world.stack.db.job.findUniqueOrThrow({ where: { id: ok.body.prompt_id } });
      expect(job.deploymentId).toBe('my-app');

      const byHost = await callWithHost(`${dep.url}/api/prompt`, 'my-app.deploy.test', {
        method: 'POST',
        headers: { 'x-api-key': alice.key, 'content-type': 'text/plain;charset=UTF-8' },
        body: JSON.stringify({ prompt: pinned }),
      });
      expect(byHost.status).toBe(200);
      expect((await world.stack.db.job.findUniqueOrThrow({ where: { id: byHost.body.prompt_id } })).deploymentId).toBe('my-app');
    });

    it('refuses another structure with 400 in the engine shape, naming the nodes', async () => {
      const extraNode = { ...structuredClone(pinned), '3': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } } };
      const otherClass = structuredClone(pinned);
      otherClass['2'].class_type = 'PreviewImage';
      const relinked = structuredClone(pinned);
      relinked['2'].inputs.images = ['1', 1];
      for (const [prompt, node] of [[extraNode, '3'], [otherClass, '2'], [relinked, '2']] as const) {
        const res = await dep.post(alice.key, '/deployment/my-app/api/prompt', { prompt });
        expect(res.status).toBe(400);
        expect(res.body.error).toEqual({ type: 'invalid_prompt', message: expect.any(String), details: expect.stringContaining(`${node}: `), extra_info: {} });
        expect(res.body.node_errors[node]).toMatchObject({ errors: [expect.objectContaining({ type: 'custom_validation_failed' })], dependent_outputs: [] });
      }
    });

    it('answers 404 without a deployment of the caller, and 422 deployment_stopped once stopped', async () => {
      const bob = await world.account();
      const cases: Array<[string, string]> = [
        [bob.key, '/deployment/my-app/api/prompt'],
        [alice.key, '/deployment/no-such-app/api/prompt'],
        [alice.key, '/api/prompt'],
      ];
      for (const [key, path] of cases) {
        const res = await dep.post(key, path, { prompt: pinned });
        expect([path, res.status]).toEqual([path, 404]);
        expect(res.body.error.code).toBe('not_found');
      }
      await setStatus('stopped');
      const stopped = await dep.post(alice.key, '/deployment/my-app/api/prompt', { prompt: pinned });
      expect(stopped.status).toBe(422);
      expect(stopped.body.error.code).toBe('deployment_stopped');
      await setStatus('ready');
    });

    it('serves the WebSocket under the deployment prefix and by host', async () => {
      const socket = await dep.socket(alice.key, { path: '/deployment/my-app/ws', clientId: 'dep-client' });
      const id = (await dep.post(alice.key, '/deployment/my-app/api/prompt', { prompt: pinned })).body.prompt_id as string;
      await socket.ended(id);
      expect(socket.texts(id).map((m) => m.type)).toContain('execution_success');
      expect(await dep.upgradeStatus(`/deployment/my-app/api/ws?token=${alice.key}`)).toBe(101);
      expect(await dep.upgradeStatus(`/ws?token=${alice.key}`, { host: 'my-app.deploy.test' })).toBe(101);
      expect(await dep.upgradeStatus(`/deployment/my-app/elsewhere?token=${alice.key}`)).toBe(404);
    });
  });
});
