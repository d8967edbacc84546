import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { loadConfig } from '#libs/config';
import { ExtraDataVault, jobKeys } from '#libs/jobs';
import { blake3Hex, createBlobStore } from '#libs/storage';
import { TEST_REDIS_URL, TEST_SIGNING_SECRET } from '../support/env.js';
import { call } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { V1Socket, V1World, sleeper, testPng } from './v1-world.js';

const PARTNER_KEY = 'partner-secret-key-0123456789';

describe('v1: queue control, execution errors, auth and bad bodies', () => {
  const world = new V1World();
  let a: { id: string; key: string };
  let ws: V1Socket;
  let redis: Redis;

  beforeAll(async () => {
    await world.start();
    a = await world.account();
    ws = await world.socket(a.key);
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    redis.disconnect();
    await world.close();
  });

  it('cancels a waiting prompt and a running one by queue delete; tuples carry no credentials', async () => {
    const running = await world.prompt(a.key, sleeper(5000), { client_id: 'me', extra_data: { api_key_service_org: PARTNER_KEY } });
    const waiting = await world.prompt(a.key, sleeper(100));
    await ws.waitFor((m) => m.type === 'execution_start' && m.data.prompt_id === running);
    // A client back while its prompt runs hears which node runs now, right after the greeting,
    // as the engine tells a reconnecting client; another client id hears no such thing.
    await waitUntil(async () => ((await world.stack.db.job.findUniqueOrThrow({ where: { id: running } })).progress as { current_node?: string } | null)?.current_node === '1', 10_000, 'the running node recorded');
    const back = await world.socket(a.key, { clientId: 'me' });
    const other = await world.socket(a.key);
    await back.waitFor((m) => m.type === 'executing');
    expect(back.messages.slice(0, 2).map((m) => [m.type, m.data])).toEqual([
      ['status', { status: { exec_info: { queue_remaining: 2 } }, sid: 'me' }],
      ['executing', { node: '1' }],
    ]);
    await new Promise((r) => setTimeout(r, 500));
    expect(other.texts().filter((m) => m.type === 'executing')).toEqual([]);
    back.close();
    other.close();
    // The partner key reaches the engine for this run (sealed in the job's vault entry, as the
    // engine's own name), and is stored nowhere else.
    const vault = new ExtraDataVault(redis, jobKeys(world.stack.redisPrefix), TEST_SIGNING_SECRET);
    expect(await vault.get(running)).toEqual({ api_key_comfy_org: PARTNER_KEY });
    const row = await world.stack.db.job.findUniqueOrThrow({ where: { id: running } });
    expect(JSON.stringify(row, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(PARTNER_KEY);

    const queue = await world.get(a.key, '/api/queue');
    expect(queue.text).not.toContain(PARTNER_KEY);
    expect(queue.body.queue_running).toEqual([[expect.any(Number), running, sleeper(5000), { client_id: 'me' }, ['1']]]);
    expect(queue.body.queue_pending).toEqual([[expect.any(Number), waiting, sleeper(100), {}, ['1']]]);
    expect(queue.body.queue_pending[0][0]).toBeGreaterThan(queue.body.queue_running[0][0]);
    expect((await world.get(a.key, '/api/prompt')).body).toEqual({ exec_info: { queue_remaining: 2 } });

    const deleted = await world.post(a.key, '/api/queue', { delete: [waiting] });
    expect(deleted.status).toBe(200);
    expect(await world.waitStatus(a.key, waiting, ['cancelled'])).toBe('cancelled');
    // The engine answers a deleted waiting prompt with a queue count only.
    await ws.waitFor((m) => m.type === 'status' && m.data.status.exec_info.queue_remaining === 1);
    expect(ws.texts(waiting)).toEqual([]);
    expect((await world.get(a.key, `/api/history/${waiting}`)).body).toEqual({});

    await world.post(a.key, '/api/queue', { delete: [running] });
    await ws.ended(running, 5000);
    const interrupted = ws.texts(running).find((m) => m.type === 'execution_interrupted');
    expect(interrupted!.data).toMatchObject({ prompt_id: running, node_type: 'SimSleep' });
    expect(await world.waitStatus(a.key, running, ['cancelled'])).toBe('cancelled');
    const history = (await world.get(a.key, `/api/history/${running}`)).body[running];
    expect(history.status.status_str).toBe('error');
    expect(history.status.messages.map((m: [string]) => m[0])).toEqual(['execution_start', 'execution_cached', 'execution_interrupted']);
    expect(history.status.messages[2][1]).toMatchObject({ prompt_id: running, node_id: '1', node_type: 'SimSleep' });
    expect(JSON.stringify(history)).not.toContain(PARTNER_KEY);
    // Gone with the run.
    expect(await vault.get(running)).toBeNull();
  });

  it('interrupts the running prompt, and clears the waiting ones', async () => {
    const first = await world.prompt(a.key, sleeper(5000));
    await ws.waitFor((m) => m.type === 'execution_start' && m.data.prompt_id === first);
    expect((await world.post(a.key, '/api/interrupt', '', null)).status).toBe(200);
    await ws.ended(first, 5000);
    expect(ws.texts(first).map((m) => m.type)).toContain('execution_interrupted');
    expect(await world.waitStatus(a.key, first, ['cancelled'])).toBe('cancelled');

    const running = await world.prompt(a.key, sleeper(5000));
    const w1 = await world.prompt(a.key, sleeper(100));
    const w2 = await world.prompt(a.key, sleeper(100));
    await world.waitStatus(a.key, running, ['executing']);
    expect((await world.post(a.key, '/api/queue', { clear: true })).status).toBe(200);
    expect(await world.waitStatus(a.key, w1, ['cancelled'])).toBe('cancelled');
    expect(await world.waitStatus(a.key, w2, ['cancelled'])).toBe('cancelled');
    expect((await world.get(a.key, `/api/job/${running}/status`)).body.status).toBe('executing');
    // An interrupt naming the prompt, as newer clients send.
    expect((await world.post(a.key, '/api/interrupt', { prompt_id: running }, 'application/json')).status).toBe(200);
    await ws.ended(running, 5000);
    expect(await world.waitStatus(a.key, running, ['cancelled'])).toBe('cancelled');
    expect((await world.get(a.key, '/api/queue')).body).toEqual({ queue_running: [], queue_pending: [] });
  });

  it('clears the history and deletes prompts from it; the jobs stay for v2, other accounts untouched', async () => {
    const c = await world.account();
    const d = await world.account();
    const [first, second, third] = [await world.prompt(c.key, sleeper(1)), await world.prompt(c.key, sleeper(1)), await world.prompt(c.key, sleeper(1))];
    const theirs = await world.prompt(d.key, sleeper(1));
    for (const id of [first, second, third]) await world.waitStatus(c.key, id, ['success']);
    await world.waitStatus(d.key, theirs, ['success']);
    const historyIds = async (key: string) => Object.keys((await world.get(key, '/api/history')).body).sort();
    expect(await historyIds(c.key)).toEqual([first, second, third].sort());
    // Pages as the engine counts them: oldest first; `offset` skips the oldest, without it the newest.
    const page = async (query: string) => Object.keys((await world.get(c.key, `/api/history?${query}`)).body);
    expect(await page('max_items=2')).toEqual([second, third]);
    expect(await page('max_items=2&offset=0')).toEqual([first, second]);
    expect(await page('offset=1')).toEqual([second, third]);
    expect(await page('max_items=1&offset=2')).toEqual([third]);

    expect((await world.post(c.key, '/api/history', { delete: [first, 'not-a-uuid'] })).status).toBe(200);
    expect((await world.get(c.key, `/api/history/${first}`)).body).toEqual({});
    expect(await historyIds(c.key)).toEqual([second, third].sort());
    // Another account's ids name nothing of the caller's: its history stays whole.
    expect((await world.post(c.key, '/api/history', { delete: [theirs] })).status).toBe(200);
    expect((await world.post(d.key, '/api/history', { delete: [second] })).status).toBe(200);
    expect(await historyIds(c.key)).toEqual([second, third].sort());
    expect(await historyIds(d.key)).toEqual([theirs]);

    expect((await world.post(c.key, '/api/history', { clear: true })).status).toBe(200);
    expect((await world.get(c.key, '/api/history')).body).toEqual({});
    expect((await world.get(c.key, `/api/history/${third}`)).body).toEqual({});
    expect(await historyIds(d.key)).toEqual([theirs]);
    // The jobs themselves are untouched: v2 still has them, with their outputs.
    const job = await call(`${world.url}/api/v2/jobs/${third}`, { headers: { authorization: `Bearer ${c.key}` } });
    expect(job.status).toBe(200);
    expect(job.body.status).toBe('succeeded');
    // A prompt that ends after the clear is history again.
    const later = await world.prompt(c.key, sleeper(1));
    await world.waitStatus(c.key, later, ['success']);
    expect(await historyIds(c.key)).toEqual([later]);

    expect((await world.post(c.key, '/api/history', { delete: 'x' })).status).toBe(400);
    const bad = await world.post(c.key, '/api/history', '{bad', 'application/json');
    expect([bad.status, bad.body.error.type]).toEqual([400, 'invalid_json']);
  });

  async function failWith(prompt: Record<string, unknown>): Promise<{ error: any; history: any; status: string }> {
    const id = await world.prompt(a.key, prompt);
    await ws.ended(id);
    const error = ws.texts(id).find((m) => m.type === 'execution_error');
    const status = await world.waitStatus(a.key, id, ['error', 'non_retryable_error']);
    const history = (await world.get(a.key, `/api/history/${id}`)).body[id];
    return { error: error?.data, history, status };
  }

  it("reports execution_error with the engine's own exception type, the same on the socket and in history", async () => {
    const raising = (type: string) => ({ '1': { class_type: 'SimFail', inputs: { exception_type: type, message: `raised ${type}` } } });
    for (const engineType of ['torch.OutOfMemoryError', 'comfy.model_management.ModelDownloadError', 'InsufficientFundsError', 'RuntimeError']) {
      const { error, history, status } = await failWith(raising(engineType));
      expect(error).toMatchObject({ node_id: '1', node_type: 'SimFail', exception_type: engineType, exception_message: expect.stringContaining(`raised ${engineType}`) });
      expect(Array.isArray(error.traceback)).toBe(true);
      expect(status).toBe('error');
      expect(history.status).toMatchObject({ status_str: 'error', completed: false });
      const last = history.status.messages.at(-1);
      // Everything the socket got, as it got it: executed, message, traceback, inputs and outputs, timestamp.
      expect(last).toEqual(['execution_error', error]);
    }

    // An input the engine cannot read: the engine's PIL error, not a download error (no URL was fetched).
    const broken = await world.upload(a.key, new TextEncoder().encode('this is not an image'), 'broken.png');
    const image = await failWith({
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
      '2': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } },
      '3': { class_type: 'LoadImage', inputs: { image: broken.body.name } },
      '4': { class_type: 'ImageScale', inputs: { image: ['3', 0], upscale_method: 'nearest-exact', width: 8, height: 8, crop: 'disabled' } },
      '5': { class_type: 'PreviewImage', inputs: { images: ['4', 0] } },
    });
    expect(image.error).toMatchObject({ exception_type: 'PIL.UnidentifiedImageError', node_type: 'LoadImage', node_id: '3' });
    expect(Array.isArray(image.error.executed)).toBe(true);
    expect(image.error.current_inputs).toHaveProperty('image');
    expect(image.error.current_outputs.sort()).toEqual(['1', '2', '3', '4', '5']);
    expect(image.history.status.messages.map((m: [string]) => m[0])).toEqual(['execution_start', 'execution_cached', 'execution_error']);
    const sent = ws.texts(image.error.prompt_id).filter((m) => ['execution_start', 'execution_cached', 'execution_error'].includes(m.type!));
    expect(image.history.status.messages).toEqual(sent.map((m) => [m.type, m.data]));
  });

  it('reports ValidationError when the engine itself refuses a prompt the API accepted', async () => {
    // An engine whose node set differs from the definitions the API validated against (a mixed
    // fleet, an engine updated in between): the worker's submission is refused by the engine.
    const keys = jobKeys(world.stack.redisPrefix);
    const saved = await redis.get(keys.nodeDefinitions);
    const savedVersion = await redis.get(`${keys.nodeDefinitions}:version`);
    const defs = JSON.parse(saved!);
    defs.SimGhost = { ...defs.SimSleep, name: 'SimGhost' };
    await redis.multi().set(keys.nodeDefinitions, JSON.stringify(defs)).set(`${keys.nodeDefinitions}:version`, 'ghost').exec();
    try {
      await new Promise((r) => setTimeout(r, 2_200)); // the API rechecks definitions every 2 s
      const { error, history, status } = await failWith({ '1': { class_type: 'SimGhost', inputs: { ms: 1 } } });
      expect(error).toMatchObject({ exception_type: 'ValidationError', exception_message: expect.stringContaining('refused') });
      expect(status).toBe('non_retryable_error');
      expect(history.status.messages.at(-1)[1].exception_type).toBe('ValidationError');
      // The ending the service sent for a prompt the engine never ran: the same in history, timestamp included.
      expect(history.status.messages.at(-1)).toEqual(['execution_error', error]);
      // The failure also comes as a notification for people.
      expect(ws.messages.some((m) => m.type === 'notification' && typeof m.data.value === 'string' && m.data.value.includes('refused'))).toBe(true);
    } finally {
      await redis.multi().set(keys.nodeDefinitions, saved!).set(`${keys.nodeDefinitions}:version`, savedVersion!).exec();
    }
  });

  it('reaches sockets on any API replica, at /ws under BASE_PATH too', async () => {
    const replica = await world.stack.startApi({ BASE_PATH: '/cloud' });
    const second = new V1World();
    Object.assign(second, { api: replica });
    const far = await second.socket(a.key, { path: '/cloud/api/ws', clientId: 'far' });
    try {
      const id = await world.prompt(a.key, sleeper(50));
      await far.ended(id);
      expect(far.texts(id).map((m) => m.type)).toEqual(expect.arrayContaining(['execution_start', 'execution_cached', 'executing', 'execution_success']));
      expect((await second.get(a.key, `/cloud/api/job/${id}/status`)).body).toEqual({ status: 'success' });
      const viaPrefix = await second.post(a.key, '/cloud/api/prompt', { prompt: sleeper(1) }, null);
      expect(viaPrefix.status).toBe(200);
      await far.ended(viaPrefix.body.prompt_id);
      expect(await second.upgradeStatus(`/cloud/ws?token=${a.key}`)).toBe(101);
      expect(await second.upgradeStatus(`/ws?token=${a.key}`)).toBe(404);
    } finally {
      far.close();
    }
  });

  it('greets with status before it answers feature_flags sent right after open, as the engine does', async () => {
    for (let n = 0; n < 5; n++) {
      const clientId = `flags-${n}`;
      const socket = new V1Socket(new WebSocket(`${world.url.replace('http', 'ws')}/ws?clientId=${clientId}&token=${a.key}`));
      socket.ws.once('open', () => socket.ws.send(JSON.stringify({ type: 'feature_flags', data: { supports_preview_metadata: true } })));
      try {
        await socket.opened;
        await socket.waitFor((m) => m.type === 'feature_flags');
        const [first, second] = socket.texts();
        expect(first).toMatchObject({ type: 'status', data: { sid: clientId } });
        expect(second).toMatchObject({ type: 'feature_flags', data: { supports_preview_metadata: true } });
      } finally {
        socket.close();
      }
    }
  });

  it('limits incoming frames: an oversized one closes the socket', async () => {
    const socket = await world.socket(a.key);
    const closed = new Promise<number>((resolve) => socket.ws.once('close', (code) => resolve(code)));
    socket.ws.send('x'.repeat(128 * 1024));
    expect(await closed).toBe(1009);
  });

  it('answers 401 to every route and the WebSocket without a valid key', async () => {
    const routes: Array<[string, string]> = [
      ['GET', '/api/object_info'],
      ['GET', '/api/object_info/KSampler'],
      ['GET', '/api/features'],
      ['GET', '/api/system_stats'],
      ['GET', '/api/prompt'],
      ['POST', '/api/prompt'],
      ['GET', '/api/queue'],
      ['POST', '/api/queue'],
      ['POST', '/api/interrupt'],
      ['POST', '/api/free'],
      ['GET', '/api/history'],
      ['POST', '/api/history'],
      ['GET', '/api/history/00000000-0000-4000-8000-000000000000'],
      ['GET', '/api/job/00000000-0000-4000-8000-000000000000/status'],
      ['GET', '/api/view?filename=x.png&type=output'],
      ['POST', '/api/upload/image'],
      ['POST', '/api/upload/mask'],
    ];
    for (const key of [null, 'not-a-key', `cck_abcdefgh_${'A'.repeat(43)}`]) {
      for (const [method, path] of routes) {
        const reply = method === 'GET' ? await world.get(key, path) : await world.post(key, path, { prompt: {} });
        expect([path, reply.status]).toEqual([path, 401]);
        expect(reply.body.error.code).toBe('unauthorized');
      }
    }
    expect(await world.upgradeStatus('/ws?clientId=x')).toBe(401);
    expect(await world.upgradeStatus('/api/ws?clientId=x&token=wrong')).toBe(401);
    expect(await world.upgradeStatus('/ws?clientId=x', { 'x-api-key': 'wrong' })).toBe(401);
    expect(await world.upgradeStatus(`/ws?clientId=x&token=${a.key}`)).toBe(101);
    expect(await world.upgradeStatus('/api/ws?clientId=x', { 'x-api-key': a.key })).toBe(101);
    expect(await world.upgradeStatus(`/elsewhere?token=${a.key}`)).toBe(404);
  });

  it('answers 402 without credits and 429 for an inactive account', async () => {
    const broke = await world.account({ credits: 0n });
    const poor = await world.post(broke.key, '/api/prompt', { prompt: sleeper(1) });
    expect(poor.status).toBe(402);
    expect(poor.body.error.code).toBe('insufficient_credits');
    const idle = await world.account();
    await world.stack.db.account.update({ where: { id: idle.id }, data: { status: 'inactive' } });
    const refused = await world.post(idle.key, '/api/prompt', { prompt: sleeper(1) });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('inactive_account');
  });

  it('answers bad bodies with 400 in the engine shape, and accepts JSON with any content type', async () => {
    const shape = { error: { type: expect.any(String), message: expect.any(String), details: expect.any(String), extra_info: {} }, node_errors: expect.any(Object) };
    const cases: Array<[string, string | null, string]> = [
      ['{this is not json', 'text/plain;charset=UTF-8', 'invalid_json'],
      ['{this is not json', 'application/json', 'invalid_json'],
      ['{this is not json', null, 'invalid_json'],
      ['[1, 2]', 'application/json', 'invalid_request'],
      ['{"client_id": "x"}', 'application/json', 'no_prompt'],
      ['{"prompt": {"1": {"inputs": {}}}}', 'text/plain', 'invalid_prompt'],
      ['{"prompt": {"1": {"class_type": "NoSuchNode", "inputs": {}}}}', 'text/plain', 'invalid_prompt'],
      ['{"prompt": {"1": {"class_type": "PreviewImage", "inputs": {}}}}', 'text/plain', 'prompt_outputs_failed_validation'],
      ['{"prompt": {"1": {"class_type": "EmptyImage", "inputs": {"width": 8, "height": 8, "batch_size": 1, "color": 0}}}}', 'text/plain', 'prompt_no_outputs'],
      ['{"prompt": {"1": {"class_type": "SimSleep", "inputs": {"ms": -5}}}}', 'text/plain', 'prompt_outputs_failed_validation'],
      [JSON.stringify({ prompt: sleeper(1), prompt_id: 'not-a-uuid' }), 'text/plain', 'invalid_prompt'],
      [JSON.stringify({ prompt: { nodes: [], links: [] } }), 'text/plain', 'invalid_prompt'],
      [JSON.stringify({ prompt: sleeper(1), extra_data: 'x' }), 'text/plain', 'invalid_prompt'],
      // Written out: a `__proto__` key in an object literal would set its prototype instead.
      ['{"prompt": {"__proto__": {"class_type": "SaveImage", "inputs": {}}}}', 'text/plain', 'invalid_prompt'],
    ];
    for (const [body, type, errorType] of cases) {
      const reply = await world.post(a.key, '/api/prompt', body, type);
      expect([body, reply.status]).toEqual([body, 400]);
      expect(reply.body).toEqual(shape);
      expect([body, reply.body.error.type]).toEqual([body, errorType]);
    }
    const missing = await world.post(a.key, '/api/prompt', { prompt: { '1': { class_type: 'PreviewImage', inputs: {} } } });
    expect(missing.body.node_errors).toEqual({
      '1': { errors: [{ type: 'required_input_missing', message: 'Required input is missing', details: 'images', extra_info: { input_name: 'images' } }], dependent_outputs: ['1'], class_type: 'PreviewImage' },
    });
    expect((await world.post(a.key, '/api/queue', 'nope', null)).status).toBe(400);
    expect((await world.post(a.key, '/api/queue', { delete: 'x' })).status).toBe(400);
    expect((await world.post(a.key, '/api/interrupt', '{bad', 'application/json')).status).toBe(400);
    // The frontend's "unload models": answered as the engine does, and it empties no shared engine.
    for (const [body, type] of [[{ unload_models: true, free_memory: true }, 'application/json'], ['{"unload_models": true}', 'text/plain;charset=UTF-8']] as const) {
      const free = await world.post(a.key, '/api/free', body, type);
      expect([free.status, free.text]).toEqual([200, '']);
    }
    const noFile = await world.post(a.key, '/api/upload/image', 'x', 'text/plain');
    expect([400, 415]).toContain(noFile.status);
    const form = new FormData();
    form.append('type', 'input');
    const emptyForm = await fetch(`${world.url}/api/upload/image`, { method: 'POST', headers: { 'x-api-key': a.key }, body: form });
    expect(emptyForm.status).toBe(400);
    const badRef = await world.upload(a.key, testPng(2, 2), 'mask.png', { original_ref: '{nope' }, '/api/upload/mask');
    expect(badRef.status).toBe(400);
    // A refused upload leaves none of its bytes in the store: nothing would ever delete them.
    const store = createBlobStore(loadConfig(world.stack.env()));
    const [first, second] = [testPng(3, 5), testPng(5, 3)];
    const twoImages = new FormData();
    twoImages.append('image', new Blob([first]), 'a.png');
    twoImages.append('image', new Blob([second]), 'b.png');
    const refused = await fetch(`${world.url}/api/upload/image`, { method: 'POST', headers: { 'x-api-key': a.key }, body: twoImages });
    expect(refused.status).toBe(400);
    expect(await store.has(blake3Hex(first))).toBe(false);
    expect(await store.has(blake3Hex(second))).toBe(false);

    // The same prompt id twice is refused; JSON without any content type is accepted.
    const id = crypto.randomUUID();
    const ok = await world.post(a.key, '/api/prompt', { prompt: sleeper(1), prompt_id: id }, null);
    expect(ok.status).toBe(200);
    expect(ok.body.prompt_id).toBe(id);
    const twice = await world.post(a.key, '/api/prompt', { prompt: sleeper(1), prompt_id: id }, 'application/json');
    expect(twice.status).toBe(400);
    expect(twice.body.error.type).toBe('invalid_prompt');
    await world.waitStatus(a.key, id, ['success']);
  });

  const envelope = (r: { status: number; body: any }) => [r.status, r.body?.error?.code, r.body?.error?.message];

  it('parses queries with their declared schemas: a bad value is refused in the route\'s shape, worded by the schema', async () => {
    const c = await world.account();
    // History: the engine reads max_items and offset with int(), which fails on anything else.
    expect(envelope(await world.get(c.key, '/api/history?max_items=abc'))).toEqual([400, 'invalid_request', 'max_items must be an integer.']);
    expect(envelope(await world.get(c.key, '/api/history?offset=1e3'))).toEqual([400, 'invalid_request', 'offset must be an integer.']);
    for (const query of ['max_items=-1', 'max_items=%2B3&offset=1_0', 'max_items=2&max_items=x', 'offset=-5']) {
      expect([query, (await world.get(c.key, `/api/history?${query}`)).status]).toEqual([query, 200]);
    }
    // View: a name is needed, and one of the engine's three folders.
    expect(envelope(await world.get(c.key, '/api/view'))).toEqual([400, 'invalid_request', 'filename is required.']);
    expect(envelope(await world.get(c.key, '/api/view?filename=a.png&type=models'))).toEqual([400, 'invalid_request', 'type must be input, output or temp.']);
    expect(envelope(await world.get(c.key, `/api/view?filename=a.png&subfolder=${'x'.repeat(1025)}`))).toEqual([400, 'invalid_request', 'subfolder must be at most 1024 characters.']);
    expect(envelope(await world.get(c.key, '/api/view?filename=a.png&type=&subfolder=x'))).toEqual([404, 'not_found', 'The file was not found.']);
    // Model metadata: the engine's 404 for a name that is not a .safetensors file, before any folder is looked at.
    expect(envelope(await world.get(c.key, '/api/view_metadata/nowhere?filename=a.ckpt'))).toEqual([404, 'not_found', 'The safetensors model was not found.']);
    // The user folder's listing: the engine's plain-text 400.
    for (const query of ['', '?dir=', '?dir=&dir=workflows']) {
      const listing = await world.get(c.key, `/api/userdata${query}`);
      expect([query, listing.status, listing.headers.get('content-type'), listing.text]).toEqual([query, 400, 'text/plain; charset=utf-8', 'Directory not provided']);
    }
  });

  it('parses upload fields with their declared schemas: a folder the engine does not have is refused, and the bytes do not stay', async () => {
    const c = await world.account();
    const store = createBlobStore(loadConfig(world.stack.env()));
    const png = testPng(7, 3);
    expect(envelope(await world.upload(c.key, png, 'a.png', { type: 'models' }))).toEqual([400, 'invalid_request', 'type must be input, output or temp.']);
    expect(await store.has(blake3Hex(png))).toBe(false);
    const temp = await world.upload(c.key, png, 'a.png', { type: 'temp', overwrite: '1' });
    expect([temp.status, temp.body.type]).toEqual([200, 'temp']);
    const mask = (fields: Record<string, string>) => world.upload(c.key, testPng(7, 3, 1, true), 'mask.png', fields, '/api/upload/mask');
    const ref = JSON.stringify({ filename: temp.body.name, subfolder: '', type: 'input' });
    expect(envelope(await mask({ original_ref: ref, type: 'models' }))).toEqual([400, 'invalid_request', 'type must be input, output or temp.']);
    expect(envelope(await mask({ original_ref: '[]' }))).toEqual([400, 'invalid_request', 'original_ref must name the original image: {filename, subfolder, type}.']);
    expect(envelope(await mask({}))).toEqual([400, 'invalid_request', 'original_ref must be JSON {filename, subfolder, type} naming the original image.']);
  });

  it('parses the log subscription with its declared schema, refused in the engine\'s 400 body', async () => {
    const c = await world.account();
    const subscribe = (body: unknown) => call(`${world.url}/api/internal/logs/subscribe`, { method: 'PATCH', headers: { 'x-api-key': c.key, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const refused = await subscribe({ clientId: 'terminal' });
    expect([refused.status, refused.body.error.type, refused.body.error.message]).toEqual([400, 'invalid_request', 'The body must be {"clientId": string, "enabled": boolean}']);
    expect((await subscribe({ clientId: 'terminal', enabled: 1 })).status).toBe(200);
  });
});
