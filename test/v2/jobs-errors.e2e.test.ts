import { randomBytes } from 'node:crypto';
import { startCloud, textToImage, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, envelopeCode, jsonInit, uploadForm } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';

describe('v2 job submission errors', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    alice = await stack.account({ name: 'alice' });
  });
  afterAll(() => stack.close());

  const submit = (body: unknown, key = alice.key, headers: Record<string, string> = {}) =>
    call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', body, bearer(key, headers)));

  it('refuses a UI-format graph with 422 workflow_format_ui', async () => {
    const res = await submit({ workflow: { nodes: [{ id: 1, type: 'EmptyImage' }], links: [], version: 0.4 } });
    expect(res.status).toBe(422);
    expect(envelopeCode(res)).toBe('workflow_format_ui');
  });

  it('reports every problem per node with 422 invalid_workflow', async () => {
    const wf = textToImage();
    wf['5'].inputs.width = 999_999; // above max
    delete wf['6'].inputs.text; // required input missing
    wf['3'].inputs.sampler_name = 'bogus'; // not in list
    wf['8'].inputs.vae = ['4', 1]; // CLIP where VAE expected
    wf['9'].inputs.images = ['42', 0]; // missing node
    const res = await submit({ workflow: wf });
    expect(res.status).toBe(422);
    expect(envelopeCode(res)).toBe('invalid_workflow');
    const errs = res.body.error.details.node_errors;
    const fields = (id: string) => errs[id].map((e: { field: string }) => e.field);
    expect(fields('9')).toEqual(['images']);
    for (const list of Object.values(errs) as { field: string; reason: string }[][]) {
      for (const item of list) expect(Object.keys(item).sort()).toEqual(['field', 'reason']);
    }
    // Node 9 cannot be followed further, so fix its link and look again.
    wf['9'].inputs.images = ['8', 0];
    const again = await submit({ workflow: wf });
    const e2 = again.body.error.details.node_errors;
    expect(e2['5'].map((e: { field: string }) => e.field)).toEqual(['width']);
    expect(e2['6'].map((e: { field: string }) => e.field)).toEqual(['text']);
    expect(e2['3'].map((e: { field: string }) => e.field)).toEqual(['sampler_name']);
    expect(e2['8'].map((e: { field: string }) => e.field)).toEqual(['vae']);
    expect(e2['8'][0].reason).toMatch(/CLIP.*VAE/);
    expect(await stack.db.job.count({ where: { accountId: alice.id } })).toBe(0);
  });

  const empty = { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } };
  it.each([
    [{ '1': { class_type: 'NoSuchNode', inputs: {} } }, /^Cannot execute because node NoSuchNode does not exist: Node ID '#1'$/, { '1': ['class_type'] }],
    [{ '1': empty }, /no outputs/i, {}],
    [{ '1': { inputs: {} } }, /class_type/, { '1': ['class_type'] }],
    [{ '1': { class_type: 'SaveImage', inputs: 5 } }, /inputs/, { '1': ['inputs'] }],
    [[], /API format/, undefined],
    [{ '1': empty, '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'a\u0000b' } } }, /NUL/, { '2': ['inputs'] }],
    // A link names its source node by its id, a string, as the engine looks it up.
    [{ '1': empty, '2': { class_type: 'SaveImage', inputs: { images: [1, 0], filename_prefix: 'a' } } }, /Bad linked input/, { '2': ['images'] }],
    ['text', /API format/, undefined],
  ])('refuses %j', async (workflow, message, nodeFields) => {
    const res = await submit({ workflow });
    expect(res.status).toBe(422);
    expect(envelopeCode(res)).toBe('invalid_workflow');
    expect(res.body.error.message).toMatch(message);
    if (nodeFields === undefined) return;
    const errors = res.body.error.details.node_errors as Record<string, { field: string }[]>;
    expect(Object.fromEntries(Object.entries(errors).map(([id, list]) => [id, list.map((e) => e.field)]))).toEqual(nodeFields);
  });

  it('refuses a body with a __proto__ key before reading it (400)', async () => {
    // Parsed, not written as a literal: there `__proto__` would set the object's prototype.
    const res = await submit({ workflow: JSON.parse('{"__proto__": {"class_type": "SaveImage", "inputs": {}}}') });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: 'invalid_json', message: expect.stringMatching(/__proto__/) });
  });

  it('refuses malformed bodies with 400', async () => {
    expect((await submit({})).status).toBe(422);
    for (const body of [{ workflow: tinyImage(), webhook_url: 'http://x' }, { workflow: tinyImage(), extra_data: { other: 'x' } }, { workflow: tinyImage(), surprise: 1 }]) {
      const res = await submit(body);
      expect(res.status).toBe(400);
      envelopeCode(res);
    }
    const badKey = await submit({ workflow: tinyImage() }, alice.key, { 'idempotency-key': 'x'.repeat(300) });
    expect(badKey.status).toBe(400);
  });

  it('resolves asset references to the caller\'s own assets only (422 missing_asset)', async () => {
    const bob = await stack.account({ name: 'bob' });
    const png = await call(`${cloud.api.url}/api/v2/assets`, { method: 'POST', headers: bearer(bob.key), body: uploadForm(randomBytes(64), 'b.png') });
    const wf = (assetId: string) => ({
      '1': { class_type: 'LoadImage', inputs: { image: { __type: 'core/ASSET', info: { id: assetId, file_path: 'b.png' } } } },
      '2': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } },
    });
    for (const id of [png.body.id, crypto.randomUUID(), 'not-a-uuid']) {
      const res = await submit({ workflow: wf(id) });
      expect(res.status).toBe(422);
      expect(envelopeCode(res)).toBe('missing_asset');
    }
    // Both cases read the same: another account's asset looks missing.
    const theirs = await submit({ workflow: wf(png.body.id) });
    const nobody = await submit({ workflow: wf('00000000-0000-4000-8000-000000000000') });
    expect(theirs.body.error.message).toBe(nobody.body.error.message);
  });

  it('refuses an account without credits with 402', async () => {
    const broke = await stack.account({ credits: 0n });
    const res = await submit({ workflow: tinyImage() }, broke.key);
    expect(res.status).toBe(402);
    expect(envelopeCode(res)).toBe('insufficient_credits');
  });

  it('refuses an inactive account with 403 forbidden', async () => {
    const inactive = await stack.account();
    await stack.admin(['account', 'set', '--account', inactive.id, '--status', 'inactive']);
    const res = await submit({ workflow: tinyImage() }, inactive.key);
    expect(res.status).toBe(403);
    expect(envelopeCode(res)).toBe('forbidden');
  });

  it('refuses past the queued-job limit with 429 queue_full and Retry-After', async () => {
    const small = await stack.account();
    await stack.accounts.setLimits(small.id, { maxQueuedJobs: 2, maxConcurrentJobs: 1 });
    await stack.admin(['account', 'set', '--account', small.id, '--max-queued-jobs', '2']);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await submit({ workflow: textToImage(i, 300) }, small.key)).status);
    const refused = await submit({ workflow: tinyImage() }, small.key);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(2);
    expect(refused.status).toBe(429);
    expect(envelopeCode(refused)).toBe('queue_full');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    for (const job of await stack.db.job.findMany({ where: { accountId: small.id } })) {
      await call(`${cloud.api.url}/api/v2/jobs/${job.id}/cancel`, { method: 'POST', headers: bearer(small.key) });
    }
  });

  it('holds the queued-job limit exactly under a burst of concurrent submissions', async () => {
    // Concurrent submissions land in several insert batches at once; each must see the jobs the
    // others added. No job may start meanwhile (concurrency 0), so the count stays exact.
    const burst = await stack.account();
    await stack.accounts.setLimits(burst.id, { maxQueuedJobs: 3, maxConcurrentJobs: 0 });
    const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => submit({ workflow: textToImage(i, 300) }, burst.key).then((r) => r.status)));
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(27);
    expect(await stack.db.job.count({ where: { accountId: burst.id, status: 'queued' } })).toBe(3);
    for (const job of await stack.db.job.findMany({ where: { accountId: burst.id } })) {
      await call(`${cloud.api.url}/api/v2/jobs/${job.id}/cancel`, { method: 'POST', headers: bearer(burst.key) });
    }
  });

  it('limits each account\'s request rate with 429 rate_limited and Retry-After', async () => {
    const chatty = await stack.account();
    await stack.admin(['account', 'set', '--account', chatty.id, '--requests-per-minute', '5']);
    const codes: number[] = [];
    for (let i = 0; i < 7; i++) codes.push((await call(`${cloud.api.url}/api/v2/jobs`, { headers: bearer(chatty.key) })).status);
    expect(codes.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    const limited = await call(`${cloud.api.url}/api/v2/jobs/${crypto.randomUUID()}/cancel`, { method: 'POST', headers: bearer(chatty.key) });
    expect(limited.status).toBe(429);
    expect(envelopeCode(limited)).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // Other accounts are not affected.
    expect((await call(`${cloud.api.url}/api/v2/jobs`, { headers: bearer(alice.key) })).status).toBe(200);
  });

  it('counts a burst of concurrent requests one by one: exactly the allowance passes', async () => {
    // Requests that arrive together are counted together (one INCRBY per account and turn of the
    // event loop); each still gets its own number, so the allowance holds to the request.
    const burst = await stack.account();
    await stack.admin(['account', 'set', '--account', burst.id, '--requests-per-minute', '5']);
    // The whole burst inside one minute window (same clock as the API's): not across its edge.
    const toNextWindow = 60_000 - (Date.now() % 60_000);
    if (toNextWindow < 3_000) await new Promise((r) => setTimeout(r, toNextWindow + 100));
    const statuses = await Promise.all(Array.from({ length: 12 }, async () => (await call(`${cloud.api.url}/api/v2/jobs`, { headers: bearer(burst.key) })).status));
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
  });

  it('limits open event streams per account with 429 too_many_streams', async () => {
    const streamer = await stack.account();
    await stack.admin(['account', 'set', '--account', streamer.id, '--max-event-streams', '2']);
    const job = await submit({ workflow: textToImage(1, 500) }, streamer.key);
    const url = `${cloud.api.url}${job.body.urls.events}`;
    const controllers = [new AbortController(), new AbortController()];
    const open = await Promise.all(controllers.map((c) => fetch(url, { headers: bearer(streamer.key), signal: c.signal })));
    expect(open.map((r) => r.status)).toEqual([200, 200]);
    const third = await call(url, { headers: bearer(streamer.key) });
    expect(third.status).toBe(429);
    expect(envelopeCode(third)).toBe('too_many_streams');
    expect(third.headers.get('retry-after')).toBeTruthy();
    controllers[0]!.abort();
    await new Promise((r) => setTimeout(r, 300));
    const c = new AbortController();
    const again = await fetch(url, { headers: bearer(streamer.key), signal: c.signal });
    expect(again.status).toBe(200);
    c.abort();
    controllers[1]!.abort();
    await call(`${cloud.api.url}${job.body.urls.cancel}`, { method: 'POST', headers: bearer(streamer.key) });
  });

  it('answers unknown jobs, and ids that are not UUIDs, with 404', async () => {
    for (const suffix of ['', '/workflow', '/events', '/logs']) {
      const res = await call(`${cloud.api.url}/api/v2/jobs/${crypto.randomUUID()}${suffix}`, { headers: bearer(alice.key) });
      expect(res.status).toBe(404);
      expect(envelopeCode(res)).toBe('not_found');
    }
    const bad = await call(`${cloud.api.url}/api/v2/jobs/123/cancel`, { method: 'POST', headers: bearer(alice.key) });
    expect(bad.status).toBe(404);
    expect(envelopeCode(bad)).toBe('not_found');
    expect((await call(`${cloud.api.url}/api/v2/jobs`, { headers: {} })).status).toBe(401);
  });
});

describe('v2 idempotency', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    alice = await stack.account({ name: 'alice' });
  });
  afterAll(() => stack.close());

  const submit = (body: unknown, key: string) =>
    call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', body, bearer(alice.key, { 'idempotency-key': key })));

  it('a key is single-use: any reuse answers 422 naming the job it created, and runs nothing', async () => {
    const key = crypto.randomUUID();
    const first = await submit({ workflow: tinyImage(1) }, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await submit({ workflow: tinyImage(1), extra_data: { api_key_comfy_org: 'sk-partner' } }, key);
    expect(again.status).toBe(422);
    expect(envelopeCode(again)).toBe('idempotency_key_reuse');
    expect(again.body.error.details).toEqual({ job_id: first.body.id });
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    const other = await submit({ workflow: tinyImage(2) }, key);
    expect(other.status).toBe(422);
    expect(envelopeCode(other)).toBe('idempotency_key_reuse');
    expect(other.body.error.details).toEqual({ job_id: first.body.id });
    expect(await stack.db.job.count({ where: { accountId: alice.id, workflow: { equals: tinyImage(2) } } })).toBe(0);
    // The job it names is the caller's, one GET away.
    expect((await call(`${cloud.api.url}/api/v2/jobs/${again.body.error.details.job_id}`, { headers: bearer(alice.key) })).status).toBe(200);
  });

  it('a reused key names its job whatever changed since: the account suspended, its input asset deleted', async () => {
    const carol = await stack.account({ name: 'carol' });
    const png = await call(`${cloud.api.url}/api/v2/assets`, { method: 'POST', headers: bearer(carol.key), body: uploadForm(randomBytes(64), 'in.png') });
    const workflow = {
      '1': { class_type: 'LoadImage', inputs: { image: { __type: 'core/ASSET', info: { id: png.body.id, file_path: 'in.png' } } } },
      '2': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } },
    };
    const key = crypto.randomUUID();
    const send = () => call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow }, bearer(carol.key, { 'idempotency-key': key })));
    const first = await send();
    expect(first.status).toBe(201);
    await waitUntil(async () => ['succeeded', 'failed'].includes((await stack.db.job.findUniqueOrThrow({ where: { id: first.body.id } })).status), 20_000, 'the job to end');
    expect((await call(`${cloud.api.url}/api/v2/assets/${png.body.id}`, { method: 'DELETE', headers: bearer(carol.key) })).status).toBe(204);
    await stack.admin(['account', 'set', '--account', carol.id, '--status', 'inactive']);

    const again = await send();
    expect(again.status).toBe(422);
    expect(envelopeCode(again)).toBe('idempotency_key_reuse');
    expect(again.body.error.details.job_id).toBe(first.body.id);
    // A new submission of that account is still refused.
    const fresh = await call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(3) }, bearer(carol.key)));
    expect(fresh.status).toBe(403);
  });

  it('creates exactly one job for 20 concurrent duplicates', async () => {
    const key = crypto.randomUUID();
    const results = await Promise.all(Array.from({ length: 20 }, () => submit({ workflow: tinyImage(7) }, key)));
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(1);
    const refused = results.filter((r) => r.status === 422);
    expect(refused).toHaveLength(19);
    expect(new Set(refused.map((r) => r.body.error.details.job_id))).toEqual(new Set([created[0]!.body.id]));
    expect(await stack.db.idempotencyRecord.count({ where: { key } })).toBe(1);
  });

  it('frees the key when the submission failed before a job existed', async () => {
    const key = crypto.randomUUID();
    const bad = await submit({ workflow: { '1': { class_type: 'Nope', inputs: {} } } }, key);
    expect(bad.status).toBe(422);
    const good = await submit({ workflow: tinyImage(9) }, key);
    expect(good.status).toBe(201);
  });
});
