import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { call, callWithHost, type Reply } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';

// The engine's user folder, settings and users (app/user_manager.py, app/app_settings.py) per
// account, against the real API process: statuses and bodies as the engine answers, with and
// without `/api`, under BASE_PATH and a deployment prefix; the names that try to leave the folder;
// the file and account limits; and two accounts that never see each other's files.

const LIMITS = { USERDATA_MAX_FILE_BYTES: '4096', USERDATA_MAX_ACCOUNT_BYTES: '10000', USERDATA_MAX_FILES: '6' };

describe('v1 user data, settings and users', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    api = await stack.startApi(LIMITS);
  });
  afterAll(() => stack.close());

  const send = (key: string | null, method: string, path: string, body?: string | Uint8Array, headers: Record<string, string> = {}, base = api.url): Promise<Reply> =>
    call(`${base}${path}`, { method, headers: { ...(key ? { 'x-api-key': key } : {}), ...headers }, ...(body === undefined ? {} : { body }) });
  const text = (r: Reply) => ({ status: r.status, text: r.text });

  describe('files', () => {
    let key: string;
    beforeAll(async () => {
      key = (await stack.account()).key;
    });

    it('stores a workflow byte for byte and serves it back with its type, with and without /api', async () => {
      const workflow = '{"nodes": [], "links": [], "extra": {"note": "ünïcode ✓"}, "big": 18446744073709551615}\n';
      const saved = await send(key, 'POST', '/api/userdata/workflows%2Fmy%20flow.json?overwrite=true&full_info=false', workflow, { 'content-type': 'text/plain;charset=UTF-8' });
      expect(saved.status).toBe(200);
      expect(saved.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(saved.body).toBe('workflows/my flow.json');
      for (const path of ['/api/userdata/workflows%2Fmy%20flow.json', '/userdata/workflows%2Fmy%20flow.json']) {
        const back = await send(key, 'GET', path);
        expect([path, back.status, back.headers.get('content-type'), back.text]).toEqual([path, 200, 'application/json', workflow]);
        expect(back.headers.get('last-modified')).toEqual(expect.any(String));
        // Unchanged since: the browser's conditional request gets 304.
        const again = await send(key, 'GET', path, undefined, { 'if-none-match': back.headers.get('etag')! });
        expect(again.status).toBe(304);
      }
      // Arbitrary bytes, any declared type, a name long past Fastify's default parameter cap.
      const bytes = randomBytes(3000);
      const long = `subgraphs%2F${'x'.repeat(180)}`;
      expect((await send(key, 'POST', `/userdata/${long}`, bytes, { 'content-type': 'application/x-custom' })).body).toBe(`subgraphs/${'x'.repeat(180)}`);
      const raw = await fetch(`${api.url}/userdata/${long}`, { headers: { 'x-api-key': key } });
      expect(raw.headers.get('content-type')).toBe('application/x-custom');
      expect(Buffer.from(await raw.arrayBuffer()).equals(bytes)).toBe(true);
      // No body at all is an empty file.
      expect((await send(key, 'POST', '/api/userdata/empty.txt')).status).toBe(200);
      const empty = await send(key, 'GET', '/api/userdata/empty.txt');
      expect([empty.status, empty.headers.get('content-type'), empty.text]).toEqual([200, 'text/plain', '']);
    });

    it('answers 409 when the file exists and overwrite is false, and full_info as the engine reports it', async () => {
      const before = Date.now() / 1000;
      const first = await send(key, 'POST', '/api/userdata/keep.json?overwrite=false&full_info=true', '{"v": 1}');
      expect(first.status).toBe(200);
      expect(first.body).toEqual({ path: 'keep.json', size: 8, modified: expect.any(Number), created: expect.any(Number) });
      expect(first.body.modified).toBeGreaterThanOrEqual(before - 1);
      expect(text(await send(key, 'POST', '/api/userdata/keep.json?overwrite=false', '{"v": 2}'))).toEqual({ status: 409, text: 'File already exists' });
      expect((await send(key, 'GET', '/userdata/keep.json')).text).toBe('{"v": 1}');
      // Anything but "false" overwrites.
      expect((await send(key, 'POST', '/userdata/keep.json?overwrite=False', '{"v": 3}')).status).toBe(200);
      expect((await send(key, 'GET', '/userdata/keep.json')).text).toBe('{"v": 3}');
    });

    it('lists a folder with dir, recurse, split and full_info, skipping hidden names, as the engine globs it', async () => {
      const k = (await stack.account()).key;
      for (const name of ['wf/a.json', 'wf/B.json', 'wf/sub/c.json', 'wf/.hidden.json', 'wf/.dot/d.json', 'other.json']) {
        expect((await send(k, 'POST', `/api/userdata/${encodeURIComponent(name)}`, '{}')).status).toBe(200);
      }
      expect((await send(k, 'GET', '/api/userdata?dir=wf')).body).toEqual(['B.json', 'a.json']);
      expect((await send(k, 'GET', '/userdata?dir=wf&recurse=true')).body).toEqual(['B.json', 'a.json', 'sub/c.json']);
      expect((await send(k, 'GET', '/userdata?dir=wf%2F&recurse=true&split=true')).body).toEqual([['B.json', 'B.json'], ['a.json', 'a.json'], ['sub/c.json', 'sub', 'c.json']]);
      const full = (await send(k, 'GET', '/userdata?dir=wf&recurse=true&split=true&full_info=true')).body;
      expect(full.map((f: { path: string }) => f.path)).toEqual(['B.json', 'a.json', 'sub/c.json']);
      expect(full[0]).toEqual({ path: 'B.json', size: 2, modified: expect.any(Number), created: expect.any(Number) });
      expect((await send(k, 'GET', '/userdata?dir=.&recurse=false')).body).toEqual(['other.json']);
      expect((await send(k, 'GET', '/userdata?dir=wf%2Fsub')).body).toEqual(['c.json']);
      expect(text(await send(k, 'GET', '/userdata'))).toEqual({ status: 400, text: 'Directory not provided' });
      expect(text(await send(k, 'GET', '/userdata?dir=nothing'))).toEqual({ status: 404, text: 'Directory not found' });
      expect(text(await send(k, 'GET', '/userdata?dir=..'))).toEqual({ status: 403, text: 'Invalid directory' });
      expect(text(await send(k, 'GET', '/api/userdata?dir=%2Fetc'))).toEqual({ status: 403, text: 'Invalid directory' });
      // An account with no file has no user folder yet, as on a fresh engine.
      expect((await send((await stack.account()).key, 'GET', '/userdata?dir=.')).status).toBe(404);

      // The v2 listing: folders first, then files, each by name; paths from the user folder.
      const v2 = (await send(k, 'GET', '/api/v2/userdata?path=wf')).body;
      expect(v2.map((e: { path: string; type: string }) => `${e.type}:${e.path}`)).toEqual([
        'directory:wf/.dot',
        'directory:wf/sub',
        'file:wf/.hidden.json',
        'file:wf/a.json',
        'file:wf/B.json',
        'file:wf/sub/c.json',
        'file:wf/.dot/d.json',
      ]);
      expect(v2.find((e: { name: string }) => e.name === 'a.json')).toEqual({ name: 'a.json', path: 'wf/a.json', type: 'file', size: 2, modified: expect.any(Number) });
      expect((await send(k, 'GET', '/v2/userdata')).body).toHaveLength(9);
      expect((await send((await stack.account()).key, 'GET', '/v2/userdata')).body).toEqual([]);
      expect(text(await send(k, 'GET', '/v2/userdata?path=missing'))).toEqual({ status: 404, text: 'Requested path not found' });
      expect(text(await send(k, 'GET', '/v2/userdata?path=other.json'))).toEqual({ status: 400, text: 'Requested path is not a directory' });
      expect(text(await send(k, 'GET', '/v2/userdata?path=..%2F..'))).toEqual({ status: 400, text: 'Invalid path requested' });
    });

    it('moves, renames into folders and deletes with the engine\'s statuses', async () => {
      const k = (await stack.account()).key;
      await send(k, 'POST', '/userdata/workflows%2Fa.json', '"A"');
      await send(k, 'POST', '/userdata/workflows%2Fb.json', '"B"');
      expect((await send(k, 'POST', '/userdata/workflows%2Fa.json/move/workflows%2Fc.json')).body).toBe('workflows/c.json');
      expect((await send(k, 'GET', '/userdata/workflows%2Fc.json')).text).toBe('"A"');
      expect((await send(k, 'GET', '/userdata/workflows%2Fa.json')).status).toBe(404);
      expect(text(await send(k, 'POST', '/api/userdata/workflows%2Fc.json/move/workflows%2Fb.json?overwrite=false'))).toEqual({ status: 409, text: 'File already exists' });
      const replaced = await send(k, 'POST', '/api/userdata/workflows%2Fc.json/move/workflows%2Fb.json?overwrite=true&full_info=true');
      expect(replaced.body).toEqual({ path: 'workflows/b.json', size: 3, modified: expect.any(Number), created: expect.any(Number) });
      expect((await send(k, 'GET', '/userdata/workflows%2Fb.json')).text).toBe('"A"');
      // Onto a folder: into it, keeping the name.
      await send(k, 'POST', '/userdata/archive%2Fold.json', '"O"');
      expect((await send(k, 'POST', '/userdata/workflows%2Fb.json/move/archive')).body).toBe('archive/b.json');
      expect((await send(k, 'POST', '/userdata/nope.json/move/x.json')).status).toBe(404);
      expect((await send(k, 'POST', '/userdata/archive%2Fb.json/move/..%2F..%2Fstolen.json')).status).toBe(403);
      expect((await send(k, 'DELETE', '/api/userdata/archive%2Fb.json')).status).toBe(204);
      expect(text(await send(k, 'DELETE', '/userdata/archive%2Fb.json'))).toEqual({ status: 404, text: 'File not found' });
      expect((await send(k, 'GET', '/userdata/archive')).status).toBe(403);
      expect((await send(k, 'DELETE', '/userdata/archive')).status).toBe(403);
    });

    it('keeps every name inside the caller\'s folder: climbing names are 403, the engine\'s own normalization applies', async () => {
      const k = (await stack.account()).key;
      for (const name of ['..%2Fsecret.json', '..%2F..%2F..%2Fetc%2Fpasswd', '%2Fetc%2Fpasswd', '%252E%252E%252Fsecret.json', 'a%2F..%2F..%2F..%2Fx', '..%2F']) {
        for (const [method, path] of [['GET', `/userdata/${name}`], ['POST', `/userdata/${name}`], ['DELETE', `/api/userdata/${name}`], ['POST', `/userdata/ok.json/move/${name}`]] as const) {
          if (path.includes('/move/')) await send(k, 'POST', '/userdata/ok.json', '1');
          const r = await send(k, method, path, method === 'POST' ? 'x' : undefined);
          expect([method, path, r.status]).toEqual([method, path, 403]);
        }
      }
      // Names that come back inside are the names they normalize to (the engine's abspath).
      expect((await send(k, 'POST', '/userdata/a%2F..%2Fb%2F.%2F%2Fc.json', 'z')).body).toBe('b/c.json');
      expect((await send(k, 'POST', '/userdata/..%2Fdefault%2Fd.json', 'z')).body).toBe('d.json');
      // A NUL or an over-long name is no file name: 400, never a 500.
      expect((await send(k, 'POST', '/userdata/a%00b.json', 'z')).status).toBe(400);
      expect((await send(k, 'POST', `/userdata/${'n'.repeat(300)}.json`, 'z')).status).toBe(400);
      // A file where a folder must be, and a folder where a file must be.
      await send(k, 'POST', '/userdata/plain', 'p');
      expect((await send(k, 'POST', '/userdata/plain%2Finside.json', 'z')).status).toBe(400);
      expect((await send(k, 'POST', '/userdata/b', 'z')).status).toBe(400);
      expect((await send(k, 'POST', '/userdata/b?overwrite=false', 'z')).status).toBe(409);
      // `%` and `_` are plain characters, never patterns.
      await send(k, 'POST', '/userdata/p_x%25%2Fone.json', '1');
      expect((await send(k, 'GET', '/userdata?dir=p_x%25')).body).toEqual(['one.json']);
      expect((await send(k, 'GET', '/userdata?dir=pax%25')).status).toBe(404);
    });

    it('enforces the file size, the account total and the file count with clear 413s', async () => {
      const k = (await stack.account()).key;
      expect((await send(k, 'POST', '/userdata/full.bin', randomBytes(4096))).status).toBe(200);
      const big = await send(k, 'POST', '/userdata/big.bin', randomBytes(4097));
      expect(big.status).toBe(413);
      expect(big.text).toContain('at most 4096 bytes (USERDATA_MAX_FILE_BYTES)');
      // Streamed without a length: cut off at the limit all the same.
      const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(`${api.url}/userdata/chunked.bin`, { method: 'POST', headers: { 'x-api-key': k, 'transfer-encoding': 'chunked' } }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        for (let i = 0; i < 10; i++) req.write(randomBytes(1000));
        req.end();
      });
      expect(streamed.status).toBe(413);
      expect((await send(k, 'GET', '/userdata/chunked.bin')).status).toBe(404);
      // Without a key the body's size is not discussed.
      expect((await send(null, 'POST', '/userdata/big.bin', randomBytes(4097))).status).toBe(401);

      expect((await send(k, 'POST', '/userdata/two.bin', randomBytes(4096))).status).toBe(200);
      const over = await send(k, 'POST', '/userdata/three.bin', randomBytes(2000));
      expect(over.status).toBe(413);
      expect(over.text).toContain('USERDATA_MAX_ACCOUNT_BYTES');
      // Replacing a file with a smaller one needs no extra room.
      expect((await send(k, 'POST', '/userdata/two.bin', randomBytes(100))).status).toBe(200);
      for (const name of ['3', '4', '5', '6']) expect((await send(k, 'POST', `/userdata/${name}`, 'x')).status).toBe(200);
      const count = await send(k, 'POST', '/userdata/7', 'x');
      expect(count.status).toBe(413);
      expect(count.text).toContain('USERDATA_MAX_FILES');
      // Settings live in the same folder, under the same limits.
      expect((await send(k, 'POST', '/settings/x', '1')).status).toBe(413);
      expect((await send(k, 'DELETE', '/userdata/6')).status).toBe(204);
      expect((await send(k, 'POST', '/settings', JSON.stringify({ huge: 'y'.repeat(5000) }))).status).toBe(413);
      expect((await send(k, 'POST', '/settings/x', '1')).status).toBe(200);
    });
  });

  describe('settings and users', () => {
    it('reads, merges and sets settings as the engine does, in comfy.settings.json', async () => {
      const { key } = await stack.account();
      expect((await send(key, 'GET', '/api/users')).body).toEqual({ storage: 'server', migrated: false });
      expect((await send(key, 'GET', '/settings')).body).toEqual({});
      expect(text(await send(key, 'GET', '/settings/Comfy.Locale'))).toEqual({ status: 200, text: 'null' });
      // The front end posts JSON without a content type.
      expect((await send(key, 'POST', '/api/settings', new TextEncoder().encode(JSON.stringify({ 'Comfy.Locale': 'en', 'Comfy.Graph': { zoom: 1 } })))).status).toBe(200);
      expect((await send(key, 'POST', '/settings', JSON.stringify({ 'Comfy.Graph': { zoom: 2 } }))).status).toBe(200);
      expect((await send(key, 'POST', '/settings/Comfy.Theme%2FDark', '"dark"', { 'content-type': 'application/json' })).status).toBe(200);
      expect((await send(key, 'POST', '/settings/Comfy.Nothing', 'null')).status).toBe(200);
      const all = { 'Comfy.Locale': 'en', 'Comfy.Graph': { zoom: 2 }, 'Comfy.Theme/Dark': 'dark', 'Comfy.Nothing': null };
      expect((await send(key, 'GET', '/settings')).body).toEqual(all);
      expect((await send(key, 'GET', '/api/settings/Comfy.Graph')).body).toEqual({ zoom: 2 });
      // The same file through the user folder, written as the engine writes it.
      const file = await send(key, 'GET', '/userdata/comfy.settings.json');
      expect([file.status, file.headers.get('content-type'), file.text]).toEqual([200, 'application/json', JSON.stringify(all, null, 4)]);
      expect((await send(key, 'GET', '/users')).body).toEqual({ storage: 'server', migrated: true });

      // Bodies that are not what the route needs: 400 with a reason, never a 500.
      for (const [path, body] of [['/settings', 'not json'], ['/settings', '[1, 2]'], ['/settings/a', '{"x": '], ['/settings/a', '']]) {
        const bad = await send(key, 'POST', path, body);
        expect([path, body, bad.status, typeof bad.body?.error?.message]).toEqual([path, body, 400, 'string']);
      }
      // A settings file that is not JSON reads as no settings, as on the engine; writing one replaces it.
      await send(key, 'POST', '/userdata/comfy.settings.json', 'garbage');
      expect((await send(key, 'GET', '/settings')).body).toEqual({});
      await send(key, 'POST', '/settings/k', '1');
      expect((await send(key, 'GET', '/settings')).body).toEqual({ k: 1 });
    });

    it('lands every one of many concurrent setting changes', async () => {
      const { key } = await stack.account();
      const changes = Array.from({ length: 20 }, (_, i) => send(key, 'POST', `/settings/key.${i}`, String(i)));
      expect((await Promise.all(changes)).map((r) => r.status)).toEqual(Array(20).fill(200));
      expect((await send(key, 'GET', '/settings')).body).toEqual(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`key.${i}`, i])));
    });

    it('has one user per account: adding users is refused in the engine\'s error shape', async () => {
      const { key } = await stack.account();
      expect(await send(key, 'POST', '/users', JSON.stringify({ username: 'default' }))).toMatchObject({ status: 400, body: { error: 'Duplicate username.' } });
      expect(await send(key, 'POST', '/api/users', JSON.stringify({ username: 'someone' }))).toMatchObject({ status: 400, body: { error: expect.stringContaining('one user per account') } });
      expect(await send(key, 'POST', '/users', JSON.stringify({}))).toMatchObject({ status: 400, body: { error: 'username not provided' } });
      expect(await send(key, 'POST', '/users', 'nonsense')).toMatchObject({ status: 400, body: { error: expect.any(String) } });
    });
  });

  it("keeps accounts apart: B reaches none of A's files or settings by any name", async () => {
    const a = (await stack.account()).key;
    const b = (await stack.account()).key;
    await send(a, 'POST', '/userdata/workflows%2Fsecret.json', '{"a": true}');
    await send(a, 'POST', '/settings', JSON.stringify({ 'A.Secret': 'alice' }));
    await send(b, 'POST', '/userdata/mine.json', '{}');
    // A's name and a name nobody has get the same answers.
    const probe = async (name: string) =>
      Promise.all([
        send(b, 'GET', `/userdata/${name}`).then(text),
        send(b, 'GET', `/api/userdata?dir=${name}`).then(text),
        send(b, 'GET', `/v2/userdata?path=${name}`).then(text),
        send(b, 'DELETE', `/userdata/${name}`).then(text),
        send(b, 'POST', `/userdata/${name}/move/x.json`).then(text),
      ]);
    expect(await probe('workflows%2Fsecret.json')).toEqual(await probe('workflows%2Fnobody.json'));
    expect(await probe('workflows')).toEqual(await probe('nofolder'));
    expect((await send(b, 'GET', '/userdata?dir=.&recurse=true')).body).toEqual(['mine.json']);
    expect((await send(b, 'GET', '/v2/userdata')).body.map((e: { path: string }) => e.path)).toEqual(['mine.json']);
    expect((await send(b, 'GET', '/settings')).body).toEqual({});
    expect((await send(b, 'GET', '/settings/A.Secret')).body).toBeNull();
    // B's writes under the same names stay B's.
    await send(b, 'POST', '/userdata/workflows%2Fsecret.json', '"b"');
    expect((await send(a, 'GET', '/userdata/workflows%2Fsecret.json')).text).toBe('{"a": true}');
    expect((await send(b, 'GET', '/userdata/workflows%2Fsecret.json')).text).toBe('"b"');
    expect((await send(a, 'GET', '/settings')).body).toEqual({ 'A.Secret': 'alice' });
  });

  it('answers 401 without a key on every route, with and without /api', async () => {
    for (const [method, path] of [
      ['GET', '/userdata?dir=.'],
      ['GET', '/userdata/a.json'],
      ['POST', '/userdata/a.json'],
      ['DELETE', '/userdata/a.json'],
      ['POST', '/userdata/a.json/move/b.json'],
      ['GET', '/v2/userdata'],
      ['GET', '/settings'],
      ['GET', '/settings/x'],
      ['POST', '/settings'],
      ['POST', '/settings/x'],
      ['GET', '/users'],
      ['POST', '/users'],
    ] as const) {
      for (const prefix of ['', '/api']) {
        const r = await send(null, method, `${prefix}${path}`, method === 'POST' ? '{}' : undefined);
        expect([method, prefix + path, r.status, r.body?.error?.code]).toEqual([method, prefix + path, 401, 'unauthorized']);
      }
    }
  });

  it('serves the engine routes without /api under BASE_PATH and a deployment prefix, and shadows nothing else', async () => {
    const { id, key } = await stack.account();
    const based = await stack.startApi({ ...LIMITS, BASE_PATH: '/gw' });
    expect((await send(key, 'POST', '/gw/userdata/x.json', '{"x": 1}', {}, based.url)).body).toBe('x.json');
    expect((await send(key, 'GET', '/gw/api/userdata/x.json', undefined, {}, based.url)).text).toBe('{"x": 1}');
    expect((await send(key, 'GET', '/gw/settings', undefined, {}, based.url)).status).toBe(200);
    expect((await send(key, 'GET', '/userdata/x.json', undefined, {}, based.url)).status).toBe(404);
    expect((await send(key, 'GET', '/gw/queue', undefined, {}, based.url)).body).toEqual({ queue_running: [], queue_pending: [] });

    const deployed = await stack.startApi({ ...LIMITS, SURFACE: 'deployment', DEPLOYMENT_DOMAIN: 'deploy.test' });
    await stack.db.deployment.create({ data: { id: 'my-app', accountId: id, workflow: {}, status: 'ready' } });
    expect((await send(key, 'GET', '/deployment/my-app/userdata/x.json', undefined, {}, deployed.url)).text).toBe('{"x": 1}');
    expect((await send(key, 'GET', '/deployment/my-app/api/settings', undefined, {}, deployed.url)).status).toBe(200);
    expect((await send(key, 'GET', '/deployment/my-app/prompt', undefined, {}, deployed.url)).body).toEqual({ exec_info: { queue_remaining: 0 } });
    const byHost = await callWithHost(`${deployed.url}/userdata/x.json`, 'my-app.deploy.test', { headers: { 'x-api-key': key } });
    expect(byHost.text).toBe('{"x": 1}');
    // The deployment's own routes and v2 keep their answers.
    expect((await call(`${deployed.url}/deployment/my-app/workflow`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await send(key, 'GET', '/api/v2/jobs')).status).toBe(401);
    expect((await call(`${api.url}/api/v2/jobs`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    for (const path of ['/openapi.json', '/docs', '/healthz']) expect([path, (await call(`${api.url}${path}`)).status]).toEqual([path, 200]);
    const router = await call(`${api.url}/v1/models`);
    expect([router.status, router.body.error_type]).toEqual([401, 'unauthorized']);
  });
});
