import { finishJob } from '#libs/jobs';
import { TestStack } from '../support/stack.js';

// The contract's state table leads out of `canceling` to `canceled` only. A run that ends on its
// own while its interrupt is on the way (a success, an error, its deadline) still ends canceled,
// charged for the time it ran, exactly once.
describe('ending a job', () => {
  const stack = new TestStack('local');

  beforeAll(() => stack.open());
  afterAll(() => stack.close());

  const started = async (status: 'running' | 'canceling') => {
    const account = await stack.account({ name: `finish-${Math.random()}` });
    return stack.db.job.create({
      data: { accountId: account.id, workflow: {}, status, startedAt: new Date(Date.now() - 2_500), expiresAt: new Date(Date.now() + 3_600_000) },
    });
  };
  const failure = { code: 'node_execution_error', message: 'boom' };

  it.each([
    ['succeeded', undefined],
    ['failed', failure],
    ['expired', { code: 'execution_timeout', message: 'late' }],
    ['canceled', undefined],
  ] as const)('ends a canceling job canceled when its run ends %s, charged once, with no error', async (status, error) => {
    const job = await started('canceling');
    const done = await finishJob(stack.db, job.id, { status, error }, 1);
    expect(done).toMatchObject({ id: job.id, status: 'canceled', error: null });
    expect(done!.chargedCredits).toBe(3n);
    expect(await finishJob(stack.db, job.id, { status: 'succeeded' }, 1)).toBeNull();
    expect(await stack.db.creditLedgerEntry.count({ where: { ref: job.id } })).toBe(1);
  });

  it.each(['canceled', 'expired'] as const)('gives a job %s in the queue the time it waited as queue_ms, and no execution_ms', async (status) => {
    const account = await stack.account({ name: `queued-${status}` });
    const job = await stack.db.job.create({ data: { accountId: account.id, workflow: {}, status: 'queued', createdAt: new Date(Date.now() - 1_500), expiresAt: new Date(Date.now() + 3_600_000) } });
    const done = await finishJob(stack.db, job.id, { status }, 1);
    expect(done!.queueMs).toBeGreaterThanOrEqual(1_500);
    expect(done!.queueMs).toBeLessThan(60_000);
    expect(done!.executionMs).toBeNull();
    expect(done!.chargedCredits).toBe(0n);
  });

  it('ends a running job as its run ended', async () => {
    const job = await started('running');
    const done = await finishJob(stack.db, job.id, { status: 'failed', error: failure }, 1);
    expect(done).toMatchObject({ status: 'failed', error: failure });
  });
});
