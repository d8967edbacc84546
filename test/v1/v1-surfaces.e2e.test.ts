import { request } from 'node:http';
import WebSocket from 'ws';
import { bearer, call } from '../support/http.js';
import { V1World, sleeper } from './v1-world.js';

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

/** The status a WebSocket upgrade from a chosen loopback address is answered with (101 when accepted). */
function upgradeFrom(localAddress: string, url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { localAddress, headers });
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      ws.close();
      resolve(101);
    });
    ws.on('error', (err) => {
      if (ws.readyState !== WebSocket.CLOSED) reject(err);
    });
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
      expect(await upgradeFrom(source, ws)).toBe(401);
      expect((await statusFrom(source, queue, { 'x-api-key': TOKEN })).status).toBe(200);

      // One wrong guess per way of presenting the token, then even the right one waits.
      expect((await statusFrom(source, queue, { 'x-api-key': 'wrong-token' })).status).toBe(401);
      expect((await statusFrom(source, queue, bearer('wrong-token'))).status).toBe(401);
      expect(await upgradeFrom(source, `${ws}&token=wrong-token`)).toBe(401);
      const blocked = await statusFrom(source, queue, { 'x-api-key': TOKEN });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.retryAfter)).toBeGreaterThan(0);
      expect(await upgradeFrom(source, `${ws}&token=${TOKEN}`)).toBe(429);
      // Other addresses are not held back.
      expect((await statusFrom('127.0.0.42', queue, { 'x-api-key': TOKEN })).status).toBe(200);
    });
  });
});
