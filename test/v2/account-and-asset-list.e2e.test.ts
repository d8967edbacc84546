import { randomBytes } from 'node:crypto';
import { jest } from '@jest/globals';
import { bearer, call, envelopeCode, jsonInit, uploadForm, type Reply } from '../support/http.js';
import { slowJob, startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';

// The two read-only v2 routes the console needs: GET /api/v2/assets (the caller's assets, newest
// first, cursor paged, uploads or outputs) and GET /api/v2/account (balance and ledger, the tier's
// limits, usage now). Both are the caller's own only: a second account sees none of it.

jest.setTimeout(60_000);

describe('GET /api/v2/assets and GET /api/v2/account', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let api: string;
  let alice: { id: string; key: string };
  let bob: { id: string; key: string };
  const uploads: { id: string; file_path: string; hash: string }[] = [];
  let job: { id: string; outputs: { id: string; hash: string; name: string }[] };

  const get = (key: string | null, path: string, init: RequestInit = {}): Promise<Reply> =>
    call(`${api}${path}`, { ...init, headers: { ...(key ? bearer(key) : {}), ...(init.headers as Record<string, string>) } });

  /** Every page of a list, following next_cursor; the ids in order. */
  async function walk(key: string, path: string, limit: number, pick: (body: any) => any = (b) => b): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 100; i++) {
      const sep = path.includes('?') ? '&' : '?';
      const r = await get(key, `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(r.status).toBe(200);
      const page = pick(r.body);
      expect(page.limit).toBe(limit);
      expect(page.data.length).toBeLessThanOrEqual(limit);
      ids.push(...page.data.map((x: { id: string }) => x.id));
      if (!page.has_more) {
        expect(page.next_cursor).toBeUndefined();
        return ids;
      }
      cursor = page.next_cursor;
    }
    throw new Error('the walk did not end');
  }

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    api = cloud.api.url;
    alice = await stack.account({ name: 'alice', credits: 5000n });
    bob = await stack.account({ name: 'bob', credits: 700n });
    for (const name of ['first.png', 'second.bin', 'third.txt']) {
      const r = await get(alice.key, '/api/v2/assets', { method: 'POST', body: uploadForm(randomBytes(200), name) });
      expect(r.status).toBe(201);
      uploads.push(r.body);
    }
    // Long enough on the engine to be charged: execution time is billed by the started second.
    const done = await get(alice.key, '/api/v2/jobs', jsonInit('POST', { workflow: slowJob(300, 5) }, { prefer: 'wait=30' }));
    expect(done.body.status).toBe('succeeded');
    job = done.body;
  }, 90_000);
  afterAll(() => stack.close());

  describe('the asset list', () => {
    it('lists the caller\'s assets newest first, uploads and outputs, each as GET /api/v2/assets/{id} shows it', async () => {
      const r = await get(alice.key, '/api/v2/assets');
      expect(r.status).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(['data', 'has_more', 'limit']);
      expect(r.body).toMatchObject({ has_more: false, limit: 20 });
      const ids = r.body.data.map((a: { id: string }) => a.id);
      expect(ids).toEqual([job.outputs[0]!.id, ...uploads.map((u) => u.id).reverse()]);
      const times = r.body.data.map((a: { created_at: string }) => Date.parse(a.created_at));
      expect([...times].sort((a, b) => b - a)).toEqual(times);
      for (const listed of r.body.data) {
        const one = await get(alice.key, `/api/v2/assets/${listed.id}`);
        const { url: _u, url_expires_at: _e, ...rest } = one.body;
        expect(listed).toMatchObject(rest);
        // The signed URL works without credentials.
        const bytes = await call(listed.url);
        expect(bytes.status).toBe(200);
      }
      expect(r.body.data[0]).toMatchObject({ job_id: job.id, hash: job.outputs[0]!.hash });
      expect(r.body.data.slice(1).every((a: { job_id: unknown }) => a.job_id === null)).toBe(true);
    });

    it('filters uploads from outputs', async () => {
      const up = await get(alice.key, '/api/v2/assets?kind=upload');
      expect(up.body.data.map((a: { id: string }) => a.id)).toEqual(uploads.map((u) => u.id).reverse());
      const out = await get(alice.key, '/api/v2/assets?kind=output');
      expect(out.body.data.map((a: { id: string }) => a.id)).toEqual([job.outputs[0]!.id]);
      const bad = await get(alice.key, '/api/v2/assets?kind=everything');
      expect([bad.status, envelopeCode(bad)]).toEqual([400, 'invalid_request']);
    });

    it('pages with an opaque cursor, every asset once, and clamps or refuses a limit as the job list does', async () => {
      const all = (await get(alice.key, '/api/v2/assets')).body.data.map((a: { id: string }) => a.id);
      for (const limit of [1, 2, 3]) expect(await walk(alice.key, '/api/v2/assets', limit)).toEqual(all);
      expect(await walk(alice.key, '/api/v2/assets?kind=upload', 2)).toEqual(uploads.map((u) => u.id).reverse());
      expect((await get(alice.key, '/api/v2/assets?limit=100000')).body.limit).toBe(100);
      expect((await get(alice.key, '/api/v2/assets?limit=0')).body.limit).toBe(20);
      for (const bad of ['x', '1.5', '']) {
        const r = await get(alice.key, `/api/v2/assets?limit=${bad}`);
        expect([bad, r.status, envelopeCode(r)]).toEqual([bad, 400, 'invalid_request']);
      }
    });

    it('refuses a cursor that was altered, or minted for another list', async () => {
      const first = await get(alice.key, '/api/v2/assets?limit=1');
      const cursor: string = first.body.next_cursor;
      const altered = cursor.slice(0, -2) + (cursor.endsWith('AA') ? 'BB' : 'AA');
      // A job list cursor names a (created_at, id) as well: it must not move to another list.
      await get(alice.key, '/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(6) }, { prefer: 'wait=30' }));
      const jobCursor: string = (await get(alice.key, '/api/v2/jobs?limit=1')).body.next_cursor;
      expect(jobCursor).toEqual(expect.any(String));
      for (const c of [altered, jobCursor, 'nonsense']) {
        const r = await get(alice.key, `/api/v2/assets?cursor=${encodeURIComponent(c)}`);
        expect([r.status, envelopeCode(r)]).toEqual([400, 'invalid_request']);
      }
    });

    it('shows another account none of them: its own list, and A\'s cursor is as good as a forged one', async () => {
      const empty = await get(bob.key, '/api/v2/assets');
      expect(empty.status).toBe(200);
      expect(empty.body).toEqual({ data: [], has_more: false, limit: 20 });
      const own = await get(bob.key, '/api/v2/assets', { method: 'POST', body: uploadForm(randomBytes(50), 'bob.bin') });
      const listed = await get(bob.key, '/api/v2/assets');
      expect(listed.body.data.map((a: { id: string }) => a.id)).toEqual([own.body.id]);
      const theirs = (await get(alice.key, '/api/v2/assets?limit=1')).body.next_cursor;
      const r = await get(bob.key, `/api/v2/assets?cursor=${encodeURIComponent(theirs)}`);
      expect([r.status, envelopeCode(r)]).toEqual([400, 'invalid_request']);
      expect(r.text).not.toContain(alice.id);
    });

    it('leaves out assets that expired or were deleted', async () => {
      const gone = await get(alice.key, '/api/v2/assets', { method: 'POST', body: uploadForm(randomBytes(60), 'gone.bin') });
      const old = await get(alice.key, '/api/v2/assets', { method: 'POST', body: uploadForm(randomBytes(60), 'old.bin') });
      expect((await get(alice.key, `/api/v2/assets/${gone.body.id}`, { method: 'DELETE' })).status).toBe(204);
      await stack.db.asset.update({ where: { id: old.body.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
      const ids = await walk(alice.key, '/api/v2/assets', 100);
      expect(ids).not.toContain(gone.body.id);
      expect(ids).not.toContain(old.body.id);
    });

    it('needs a credential', async () => {
      const r = await get(null, '/api/v2/assets');
      expect([r.status, envelopeCode(r)]).toEqual([401, 'unauthorized']);
    });
  });

  describe('the account', () => {
    it('shows the balance, the tier\'s limits and the ledger behind the balance, newest first', async () => {
      const r = await get(alice.key, '/api/v2/account');
      expect(r.status).toBe(200);
      const row = await stack.db.account.findUniqueOrThrow({ where: { id: alice.id } });
      expect(r.body).toMatchObject({
        id: alice.id,
        name: 'alice',
        tier: 'pro',
        status: 'active',
        credit_balance: Number(row.creditBalance),
        limits: { max_concurrent_jobs: row.maxConcurrentJobs, max_queued_jobs: row.maxQueuedJobs, requests_per_minute: row.requestsPerMinute, max_event_streams: row.maxEventStreams },
        router: { enabled: false, max_concurrent_calls: row.routerMaxConcurrent, spend_cap_cents: row.routerSpendCapCents, window_calls: row.routerWindowCalls, window_seconds: row.routerWindowSeconds },
      });
      const entries = r.body.charges.data as { id: string; amount: number; reason: string; ref: string | null; created_at: string }[];
      expect(entries.at(-1)).toMatchObject({ amount: 5000, reason: 'grant', ref: null });
      const charge = entries.find((e) => e.ref === job.id);
      expect(charge).toMatchObject({ reason: 'job' });
      expect(charge!.amount).toBeLessThan(0);
      // The balance is what the ledger adds up to.
      expect(entries.reduce((sum, e) => sum + e.amount, 0)).toBe(r.body.credit_balance);
      const times = entries.map((e) => Date.parse(e.created_at));
      expect([...times].sort((a, b) => b - a)).toEqual(times);
    });

    it('pages the ledger with a cursor of its own', async () => {
      for (let i = 1; i <= 5; i++) await stack.accounts.addCredits(alice.id, BigInt(i));
      const all = (await get(alice.key, '/api/v2/account?limit=100')).body.charges.data.map((e: { id: string }) => e.id);
      expect(all.length).toBeGreaterThanOrEqual(7);
      expect(await walk(alice.key, '/api/v2/account', 2, (b) => b.charges)).toEqual(all);
      const newest = (await get(alice.key, '/api/v2/account?limit=1')).body.charges;
      expect(newest).toMatchObject({ has_more: true, limit: 1, data: [{ amount: 5, reason: 'grant' }] });
      const assetCursor = (await get(alice.key, '/api/v2/assets?limit=1')).body.next_cursor;
      const wrongList = await get(alice.key, `/api/v2/account?cursor=${encodeURIComponent(assetCursor)}`);
      expect([wrongList.status, envelopeCode(wrongList)]).toEqual([400, 'invalid_request']);
    });

    it('shows what is in use now: running and queued jobs, open event streams, this minute\'s requests', async () => {
      const carol = await stack.account({ name: 'carol' });
      await stack.accounts.setLimits(carol.id, { maxConcurrentJobs: 1 });
      const idle = (await get(carol.key, '/api/v2/account')).body.usage;
      expect(idle).toEqual({ running_jobs: 0, queued_jobs: 0, open_event_streams: 0, requests_this_minute: 1, model_bytes: 0 });

      const running = await get(carol.key, '/api/v2/jobs', jsonInit('POST', { workflow: slowJob(60_000) }));
      await waitUntil(async () => (await get(carol.key, `/api/v2/jobs/${running.body.id}`)).body.status === 'running', 20_000, 'running');
      const queued = await get(carol.key, '/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(9) }));
      const stream = new AbortController();
      const events = await fetch(`${api}/api/v2/jobs/${running.body.id}/events`, { headers: bearer(carol.key), signal: stream.signal });
      expect(events.status).toBe(200);
      try {
        const busy = (await get(carol.key, '/api/v2/account')).body;
        expect(busy.usage).toMatchObject({ running_jobs: 1, queued_jobs: 1, open_event_streams: 1 });
        expect(busy.usage.requests_this_minute).toBeGreaterThanOrEqual(6);
        expect(busy.limits.max_concurrent_jobs).toBe(1);
      } finally {
        stream.abort();
        await get(carol.key, `/api/v2/jobs/${queued.body.id}/cancel`, { method: 'POST' });
        await get(carol.key, `/api/v2/jobs/${running.body.id}/cancel`, { method: 'POST' });
      }
      await waitUntil(async () => (await get(carol.key, '/api/v2/account')).body.usage.running_jobs === 0, 20_000, 'nothing running');
    });

    it('is the caller\'s own: another account sees its own balance and ledger, never A\'s', async () => {
      const r = await get(bob.key, '/api/v2/account');
      expect(r.body).toMatchObject({ id: bob.id, name: 'bob', credit_balance: 700 });
      expect(r.body.charges.data).toEqual([expect.objectContaining({ amount: 700, reason: 'grant' })]);
      expect(r.text).not.toContain(alice.id);
      expect(r.text).not.toContain(job.id);
      const aliceCursor = (await get(alice.key, '/api/v2/account?limit=1')).body.charges.next_cursor;
      const theirs = await get(bob.key, `/api/v2/account?cursor=${encodeURIComponent(aliceCursor)}`);
      expect([theirs.status, envelopeCode(theirs)]).toEqual([400, 'invalid_request']);
    });

    it('is read-only and needs a credential', async () => {
      const before = (await get(alice.key, '/api/v2/account')).body.credit_balance;
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const r = await get(alice.key, '/api/v2/account', { ...jsonInit(method, { credit_balance: 1e9 }) });
        expect([method, r.status]).toEqual([method, 404]);
      }
      expect((await get(alice.key, '/api/v2/account')).body.credit_balance).toBe(before);
      const r = await get(null, '/api/v2/account');
      expect([r.status, envelopeCode(r)]).toEqual([401, 'unauthorized']);
    });
  });
});
