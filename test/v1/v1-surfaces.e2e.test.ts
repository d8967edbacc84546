import { request } from 'node:http';
import { tinyImage } from '../support/cloud.js';
import { bearer, call, callWithHost, type Reply } from '../support/http.js';
import { V1World, sleeper, upgradeStatusOf, type V1Socket } from './v1-world.js';

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
      expect(await dep.waitStatus(alice.key, ok.body.prompt_id, ['success'], { prefix: '/deployment/my-app' })).toBe('success');
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

    // One account with two deployments and cloud jobs, on the one worker: a job of A runs, one job
    // of each place waits behind it, and each place has a finished one in its history.
    describe("job routes see the addressed deployment's jobs only, and the cloud all of the account's, as on v2", () => {
      const a = 'v1-scope-a';
      const b = 'v1-scope-b';
      type Place = 'a' | 'b' | 'cloud';
      const prefix: Record<Place, string> = { a: `/deployment/${a}`, b: `/deployment/${b}`, cloud: '' };
      let cloud: V1World;
      let owner: { id: string; key: string };
      let running: string;
      const done = {} as Record<Place, string>;
      const waiting = {} as Record<Place, string>;
      const sockets = {} as Record<Place, V1Socket>;

      const on = (place: Place) => (place === 'cloud' ? cloud : dep);
      const get = (place: Place, path: string) => on(place).get(owner.key, `${prefix[place]}${path}`);
      const post = (place: Place, path: string, body: unknown) => on(place).post(owner.key, `${prefix[place]}${path}`, body);
      const promptAt = async (place: Place, ms: number) => {
        const res = await post(place, '/api/prompt', { prompt: sleeper(ms) });
        expect(res.status).toBe(200);
        return res.body.prompt_id as string;
      };
      const queueIds = (r: Reply) => ({
        running: r.body.queue_running.map((t: unknown[]) => t[1]).sort(),
        pending: r.body.queue_pending.map((t: unknown[]) => t[1]).sort(),
      });
      const answer = (r: Reply) => ({ status: r.status, code: r.body?.error?.code, message: r.body?.error?.message });
      // The cloud sees every job of the account (checked below), so the waits go through it.
      const statusOf = async (id: string) => (await get('cloud', `/api/job/${id}/status`)).body.status as string;

      beforeAll(async () => {
        cloud = await world.otherApi({ SURFACE: 'cloud' });
        owner = await world.account();
        for (const id of [a, b]) await world.stack.db.deployment.create({ data: { id, accountId: owner.id, workflow: sleeper(1), status: 'ready' } });
        for (const place of ['a', 'b', 'cloud'] as const) sockets[place] = await on(place).socket(owner.key, { path: `${prefix[place]}/ws` });
        for (const place of ['a', 'b', 'cloud'] as const) {
          done[place] = await promptAt(place, 1);
          await cloud.waitStatus(owner.key, done[place], ['success']);
        }
        running = await promptAt('a', 60_000);
        await cloud.waitStatus(owner.key, running, ['executing']);
        for (const place of ['a', 'b', 'cloud'] as const) waiting[place] = await promptAt(place, 1);
      });

      afterAll(async () => {
        // The long job would hold the one worker the later tests share.
        await cloud.post(owner.key, '/api/queue', { clear: true });
        await cloud.post(owner.key, '/api/interrupt', {});
      });

      it('lists and counts the queue per deployment, by path and by host', async () => {
        expect(queueIds(await get('a', '/api/queue'))).toEqual({ running: [running], pending: [waiting.a] });
        expect(queueIds(await get('b', '/api/queue'))).toEqual({ running: [], pending: [waiting.b] });
        const byHost = await callWithHost(`${dep.url}/api/queue`, `${b}.deploy.test`, { headers: { 'x-api-key': owner.key } });
        expect(queueIds(byHost)).toEqual({ running: [], pending: [waiting.b] });
        expect(queueIds(await get('cloud', '/api/queue'))).toEqual({ running: [running], pending: Object.values(waiting).sort() });

        expect((await get('a', '/api/prompt')).body).toEqual({ exec_info: { queue_remaining: 2 } });
        expect((await get('b', '/api/prompt')).body).toEqual({ exec_info: { queue_remaining: 1 } });
        expect((await get('cloud', '/api/prompt')).body).toEqual({ exec_info: { queue_remaining: 4 } });
      });

      it("sends a deployment's sockets its own jobs' messages and queue count only", async () => {
        const promptsOf = (place: Place) => new Set(sockets[place].texts().map((m) => m.data?.prompt_id as string | undefined));
        const succeeded = (place: Place) => sockets[place].texts().filter((m) => m.type === 'execution_success').map((m) => m.data.prompt_id as string);
        for (const place of ['a', 'b', 'cloud'] as const) await sockets[place].ended(done[place]);
        expect(succeeded('a')).toEqual([done.a]);
        expect(succeeded('b')).toEqual([done.b]);
        expect(succeeded('cloud')).toEqual([done.a, done.b, done.cloud]);
        for (const id of [done.b, done.cloud, waiting.b, waiting.cloud]) expect([id, promptsOf('a').has(id)]).toEqual([id, false]);
        for (const id of [done.a, done.cloud, running, waiting.a, waiting.cloud]) expect([id, promptsOf('b').has(id)]).toEqual([id, false]);

        const greeting = async (place: Place) => {
          const socket = await on(place).socket(owner.key, { path: `${prefix[place]}/ws` });
          return (await socket.waitFor((m) => m.type === 'status')).data.status.exec_info.queue_remaining as number;
        };
        expect(await greeting('a')).toBe(2);
        expect(await greeting('b')).toBe(1);
        expect(await greeting('cloud')).toBe(4);
      });

      it("answers another place's prompt in history and status as an unknown one", async () => {
        expect(Object.keys((await get('a', '/api/history')).body)).toEqual([done.a]);
        expect(Object.keys((await get('b', '/api/history')).body)).toEqual([done.b]);
        expect(Object.keys((await get('cloud', '/api/history')).body)).toEqual([done.a, done.b, done.cloud]);

        const unknownStatus = answer(await get('a', '/api/job/00000000-0000-4000-8000-000000000000/status'));
        expect(unknownStatus.status).toBe(404);
        for (const id of [done.b, done.cloud]) {
          expect((await get('a', `/api/history/${id}`)).body).toEqual({});
          expect(answer(await get('a', `/api/job/${id}/status`))).toEqual(unknownStatus);
        }
        expect(Object.keys((await get('a', `/api/history/${done.a}`)).body)).toEqual([done.a]);
        expect((await get('a', `/api/job/${done.a}/status`)).body.status).toBe('success');
        expect(Object.keys((await get('cloud', `/api/history/${done.b}`)).body)).toEqual([done.b]);
      });

      it("does not interrupt another deployment's running job", async () => {
        for (const body of [{}, { prompt_id: running }]) expect((await post('b', '/api/interrupt', body)).status).toBe(200);
        expect(await statusOf(running)).toBe('executing');
      });

      it("deletes and clears only the deployment's own waiting jobs", async () => {
        expect((await post('b', '/api/queue', { delete: [waiting.a, waiting.cloud, running] })).status).toBe(200);
        expect((await post('a', '/api/queue', { delete: [waiting.b, waiting.cloud] })).status).toBe(200);
        expect((await post('b', '/api/queue', { clear: true })).status).toBe(200);
        expect(await statusOf(waiting.b)).toBe('cancelled');
        expect(queueIds(await get('cloud', '/api/queue'))).toEqual({ running: [running], pending: [waiting.a, waiting.cloud].sort() });
      });

      it("edits only the deployment's own history", async () => {
        expect((await post('b', '/api/history', { delete: [done.a, done.cloud] })).status).toBe(200);
        expect((await post('a', '/api/history', { clear: true })).status).toBe(200);
        expect(Object.keys((await get('cloud', '/api/history')).body)).toEqual([done.b, done.cloud]);
        expect(Object.keys((await get('b', '/api/history')).body)).toEqual([done.b]);
        expect((await get('a', '/api/history')).body).toEqual({});
      });

      it('answers every job route as a submission when the address names no deployment of the caller', async () => {
        const stranger = await world.account();
        const routes: Array<[string, string, unknown?]> = [
          ['GET', '/api/prompt'],
          ['GET', '/api/queue'],
          ['GET', '/api/history'],
          ['GET', `/api/history/${done.b}`],
          ['GET', `/api/job/${done.b}/status`],
          ['POST', '/api/queue', { clear: true }],
          ['POST', '/api/interrupt', {}],
          ['POST', '/api/history', { clear: true }],
        ];
        const addresses: Array<[string, string]> = [
          [stranger.key, `/deployment/${a}`],
          [owner.key, '/deployment/no-such-app'],
          [owner.key, ''],
        ];
        for (const [key, place] of addresses) {
          const submit = answer(await dep.post(key, `${place}/api/prompt`, { prompt: sleeper(1) }));
          expect(submit.status).toBe(404);
          for (const [method, route, body] of routes) {
            const r = method === 'GET' ? await dep.get(key, `${place}${route}`) : await dep.post(key, `${place}${route}`, body);
            expect({ place, route, ...answer(r) }).toEqual({ place, route, ...submit });
          }
          expect([place, await dep.upgradeStatus(`${place}/ws?token=${key}`)]).toEqual([place, 404]);
        }
        // None of them touched the owner's jobs.
        expect(queueIds(await get('cloud', '/api/queue'))).toEqual({ running: [running], pending: [waiting.a, waiting.cloud].sort() });
        expect(Object.keys((await get('cloud', '/api/history')).body)).toEqual([done.b, done.cloud]);
      });

      it("on the cloud, interrupts and clears the deployments' jobs too", async () => {
        expect((await post('cloud', '/api/interrupt', { prompt_id: running })).status).toBe(200);
        expect((await post('cloud', '/api/queue', { clear: true })).status).toBe(200);
        expect(await cloud.waitStatus(owner.key, running, ['cancelled'])).toBe('cancelled');
        expect(await statusOf(waiting.a)).toBe('cancelled');
        expect((await get('cloud', '/api/prompt')).body).toEqual({ exec_info: { queue_remaining: 0 } });
      });
    });
  });
});
