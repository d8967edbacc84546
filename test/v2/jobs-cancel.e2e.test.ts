import { startCloud, slowJob, textToImage, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';

describe('v2 cancel', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    alice = await stack.account({ name: 'alice' });
    await stack.admin(['account', 'set', '--account', alice.id, '--max-concurrent-jobs', '1']);
  });
  afterAll(() => stack.close());

  const submit = (workflow: unknown) => call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow }, bearer(alice.key)));
  const get = (id: string) => call(`${cloud.api.url}/api/v2/jobs/${id}`, { headers: bearer(alice.key) });
  const cancel = (id: string) => call(`${cloud.api.url}/api/v2/jobs/${id}/cancel`, { method: 'POST', headers: bearer(alice.key) });
  const until = async (id: string, statuses: string[]) => {
    let last = '';
    await waitUntil(async () => statuses.includes((last = (await get(id)).body.status)), 20_000, `job ${id} to be ${statuses} (is ${last})`);
    return (await get(id)).body;
  };

  it('cancels a running job: canceling, then canceled once the engine stops; billed time charged', async () => {
    const running = await submit(textToImage(3, 400));
    await until(running.body.id, ['running']);
    const res = await cancel(running.body.id);
    expect(res.status).toBe(200);
    expect(['canceling', 'canceled']).toContain(res.body.status);
    const done = await until(running.body.id, ['canceled']);
    expect(done.completed_at).not.toBeNull();
    expect(done.metrics.execution_ms).toEqual(expect.any(Number));
    const charge = await stack.db.creditLedgerEntry.findMany({ where: { ref: running.body.id } });
    expect(charge).toHaveLength(1);
    expect(Number(charge[0]!.amount)).toBeLessThan(0);
  });

  it('cancels a queued job at once, and it never runs', async () => {
    const blocker = await submit(slowJob(3000));
    await until(blocker.body.id, ['running']);
    const queued = await submit(tinyImage(5));
    expect(queued.body.status).toBe('queued');
    expect(queued.body.queue_position).toBe(0);
    const res = await cancel(queued.body.id);
    expect(res.body.status).toBe('canceled');
    expect(res.body.queue_position).toBeNull();
    await cancel(blocker.body.id);
    await until(blocker.body.id, ['canceled']);
    const after = await get(queued.body.id);
    expect(after.body.status).toBe('canceled');
    expect(after.body.started_at).toBeNull();
    expect(await stack.db.creditLedgerEntry.count({ where: { ref: queued.body.id } })).toBe(0);
  });

  it('leaves a finished job as it is, and is idempotent', async () => {
    const done = await call(`${cloud.api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(8) }, bearer(alice.key, { prefer: 'wait=20' })));
    expect(done.body.status).toBe('succeeded');
    for (let i = 0; i < 2; i++) {
      const res = await cancel(done.body.id);
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('succeeded');
      expect(res.body.completed_at).toBe(done.body.completed_at);
    }
  });

  it('resolves a cancel racing a success to exactly one terminal state, charged once', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const job = await submit(tinyImage(100 + i));
      // Cancel as the job is about to finish or already finished.
      await new Promise((r) => setTimeout(r, i * 15));
      const answered = (await cancel(job.body.id)).body.status as string;
      const final = await until(job.body.id, ['succeeded', 'canceled']);
      // The state table: a cancel answered `canceling` ends `canceled`, even when the run's own
      // success raced the interrupt; an answer that was already terminal is the job's last word.
      expect(final.status).toBe(answered === 'succeeded' ? 'succeeded' : 'canceled');
      outcomes.push(final.status);
      const ledger = await stack.db.creditLedgerEntry.count({ where: { ref: job.body.id } });
      expect(ledger).toBeLessThanOrEqual(1);
      if (final.status === 'succeeded') expect(final.outputs).toHaveLength(1);
      // Nothing changes afterwards.
      await new Promise((r) => setTimeout(r, 100));
      expect((await get(job.body.id)).body.status).toBe(final.status);
    }
    expect(outcomes.every((s) => s === 'succeeded' || s === 'canceled')).toBe(true);
  });
});
