import { slowJob, startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, envelopeCode, jsonInit } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';

describe('deadlines, retention and tenant isolation', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };
  let bob: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack, {
      api: { JOB_RETENTION_SECONDS: '60', JOB_QUEUE_TIMEOUT_SECONDS: '3' },
      worker: { JOB_EXECUTION_TIMEOUT_SECONDS: '2' },
    });
    alice = await stack.account({ name: 'alice' });
    bob = await stack.account({ name: 'bob' });
    await stack.admin(['account', 'set', '--account', alice.id, '--max-concurrent-jobs', '1']);
  });
  afterAll(() => stack.close());

  const submit = (workflow: unknown, key = alice.key, headers: Record<string, string> = {}) =>
    call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow }, bearer(key, headers)));
  const get = (id: string, key = alice.key) => call(`${cloud.api.url}/api/v2/jobs/${id}`, { headers: bearer(key) });

  it('expires a job that runs past the execution deadline, and one that waits past the queue deadline', async () => {
    const long = await submit(slowJob(20_000));
    // An account allowed no concurrent job: its job can only wait, until the queue deadline.
    const carol = await stack.account({ name: 'carol' });
    await stack.admin(['account', 'set', '--account', carol.id, '--max-concurrent-jobs', '0']);
    const waiting = await submit(tinyImage(5), carol.key);
    await waitUntil(async () => (await get(waiting.body.id, carol.key)).body.status === 'expired', 20_000, 'queue deadline');
    const w = (await get(waiting.body.id, carol.key)).body;
    expect(w.error).toMatchObject({ code: 'queue_timeout' });
    expect(w.started_at).toBeNull();
    await waitUntil(async () => (await get(long.body.id)).body.status === 'expired', 20_000, 'execution deadline');
    const l = (await get(long.body.id)).body;
    expect(l.error).toMatchObject({ code: 'execution_timeout' });
    expect(l.metrics.execution_ms).toBeGreaterThanOrEqual(1900);
  }, 60_000);

  it('deletes a job and its outputs after expires_at; they answer 404', async () => {
    const done = await submit(tinyImage(9), alice.key, { prefer: 'wait=20' });
    expect(done.body.status).toBe('succeeded');
    expect(Date.parse(done.body.expires_at) - Date.parse(done.body.created_at)).toBeGreaterThanOrEqual(59_000);
    const output = done.body.outputs[0];
    // Its link ends no later than the output does (the link's TTL is an hour, the retention a minute),
    // in the job, in the list and as the asset.
    const listed = (await call(`${cloud.api.url}/api/v2/jobs?limit=5`, { headers: bearer(alice.key) })).body.data.find((j: { id: string }) => j.id === done.body.id);
    const asset = (await call(`${cloud.api.url}/api/v2/assets/${output.id}`, { headers: bearer(alice.key) })).body;
    for (const link of [output, listed.outputs[0], (await get(done.body.id)).body.outputs[0], asset]) {
      expect(Date.parse(link.url_expires_at)).toBeLessThanOrEqual(Date.parse(done.body.expires_at));
    }
    await stack.db.job.update({ where: { id: done.body.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await stack.db.asset.updateMany({ where: { jobId: done.body.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await waitUntil(async () => (await get(done.body.id)).status === 404, 20_000, 'retention sweep');
    expect(envelopeCode(await get(done.body.id))).toBe('not_found');
    expect((await call(`${cloud.api.url}/api/v2/assets/${output.id}`, { headers: bearer(alice.key) })).status).toBe(404);
    expect(await stack.db.blob.findUnique({ where: { hash: output.hash.slice(7) } })).toBeNull();
    expect((await fetch(output.url)).status).toBe(404);
  }, 40_000);

  it('gives another account nothing about a job: every endpoint answers as for a missing job', async () => {
    const mine = await submit(tinyImage(3), alice.key, { prefer: 'wait=20' });
    const missing = crypto.randomUUID();
    for (const [method, suffix] of [['GET', ''], ['GET', '/workflow'], ['GET', '/events'], ['GET', '/logs'], ['POST', '/cancel']] as const) {
      const theirs = await call(`${cloud.api.url}/api/v2/jobs/${mine.body.id}${suffix}`, { method, headers: bearer(bob.key) });
      const none = await call(`${cloud.api.url}/api/v2/jobs/${missing}${suffix}`, { method, headers: bearer(bob.key) });
      expect(theirs.status).toBe(404);
      expect(theirs.body).toEqual(none.body);
    }
    const list = await call(`${cloud.api.url}/api/v2/jobs`, { headers: bearer(bob.key) });
    expect(list.body.data.map((j: { id: string }) => j.id)).not.toContain(mine.body.id);
    // The job is untouched by Bob's cancel.
    expect((await get(mine.body.id)).body.status).toBe('succeeded');
    // Bob cannot reach Alice's output asset either.
    expect((await call(`${cloud.api.url}/api/v2/assets/${mine.body.outputs[0].id}`, { headers: bearer(bob.key) })).status).toBe(404);
  });
});
