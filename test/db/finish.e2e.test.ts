import { finishJob } from '#libs/jobs';
import { TestStack } from '../support/stack.js';

// The contract's state table leads out of `canceling` to `canceled` only. A run that ends on its
// own while its interrupt is on the way (a success, an error, its deadline) still ends canceled,
// charged for the engine's time, exactly once.
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
    const done = await finishJob(stack.db, job.id, { status, error, engineMs: 2_500 }, 1);
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

  it('charges the engine time its runs reported, not the time since the first start', async () => {
    const job = await started('running');
    // An earlier run handed the job back after 1.2 s of engine time; a lost one reported nothing.
    await stack.db.job.update({ where: { id: job.id }, data: { billedMs: 1_200, startedAt: new Date(Date.now() - 60_000) } });
    const done = await finishJob(stack.db, job.id, { status: 'succeeded', engineMs: 1_500 }, 2);
    expect(done!.billedMs).toBe(2_700);
    expect(done!.chargedCredits).toBe(6n);
    expect(done!.executionMs).toBeGreaterThanOrEqual(60_000);
  });

  it('charges nothing for a job whose outputs the service could not keep', async () => {
    const job = await started('running');
    const done = await finishJob(stack.db, job.id, { status: 'failed', error: { code: 'output_store_failed', message: 'disk full' }, engineMs: 4_000, free: true }, 1);
    expect(done!.chargedCredits).toBe(0n);
    expect(await stack.db.creditLedgerEntry.count({ where: { ref: job.id } })).toBe(0);
  });

  it('a run whose job another worker took over cannot finish it', async () => {
    const job = await started('running');
    await stack.db.job.update({ where: { id: job.id }, data: { workerId: 'w2', attempts: 2 } });
    expect(await finishJob(stack.db, job.id, { status: 'succeeded', engineMs: 10 }, 1, new Date(), { workerId: 'w1', attempt: 1 })).toBeNull();
    expect(await finishJob(stack.db, job.id, { status: 'succeeded', engineMs: 10 }, 1, new Date(), { workerId: 'w2', attempt: 1 })).toBeNull();
    expect((await finishJob(stack.db, job.id, { status: 'succeeded', engineMs: 10 }, 1, new Date(), { workerId: 'w2', attempt: 2 }))?.status).toBe('succeeded');
  });

  // Nobody who ends a job reads them, and on a real job they are nearly all of its row.
  it('returns the ended job without its submitted workflow, engine messages and log, and the prompt only without a progress snapshot', async () => {
    const prompt = { '1': { class_type: 'EmptyImage', inputs: { width: 64, height: 64 } } };
    const heavy = { workflow: prompt, submittedWorkflow: { nodes: [{ id: 1 }] }, engineMessages: [['executing', { node: '1' }]], logText: 'a line\n' };
    const job = await started('running');
    await stack.db.job.update({ where: { id: job.id }, data: { ...heavy, progress: { value: 0.5 } } });
    const done = (await finishJob(stack.db, job.id, { status: 'succeeded', engineMessages: [['executed', { node: '1' }]] }, 1)) as Record<string, unknown> | null;
    expect(done).toMatchObject({ id: job.id, status: 'succeeded', progress: { value: 0.5 }, workflow: null });
    for (const left of ['submittedWorkflow', 'engineMessages', 'logText']) expect(done).not.toHaveProperty(left);
    // Stored all the same.
    expect(await stack.db.job.findUniqueOrThrow({ where: { id: job.id } })).toMatchObject({ ...heavy, engineMessages: [['executed', { node: '1' }]] });

    const bare = await started('running');
    await stack.db.job.update({ where: { id: bare.id }, data: { workflow: prompt } });
    expect(await finishJob(stack.db, bare.id, { status: 'succeeded' }, 1)).toMatchObject({ progress: null, workflow: prompt });
  });

  it('ends a running job as its run ended', async () => {
    const job = await started('running');
    const done = await finishJob(stack.db, job.id, { status: 'failed', error: failure }, 1);
    expect(done).toMatchObject({ status: 'failed', error: failure });
  });
});
