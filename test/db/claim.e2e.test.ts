import { claimJob } from '#libs/jobs';
import { TestStack } from '../support/stack.js';

// A job that waited past its queue deadline must end `expired`, never run: a worker that takes
// it from the run queue before the sweeper has expired it must not start it.
describe('claiming a job', () => {
  const stack = new TestStack('local');

  beforeAll(() => stack.open());
  afterAll(() => stack.close());

  const queued = async (data: { queueDeadlineAt: Date | null; attempts?: number }) => {
    const account = await stack.account({ name: `claim-${Math.random()}` });
    return stack.db.job.create({ data: { accountId: account.id, workflow: {}, expiresAt: new Date(Date.now() + 3_600_000), dispatchedAt: new Date(), ...data } });
  };
  const claim = (jobId: string) => claimJob(stack.db, jobId, { workerId: 'w1', enginePromptId: crypto.randomUUID(), executionTimeoutSeconds: 60 });

  it('starts a job within its queue deadline', async () => {
    const job = await queued({ queueDeadlineAt: new Date(Date.now() + 60_000) });
    expect((await claim(job.id))?.job).toMatchObject({ id: job.id, status: 'running', attempts: 1 });
  });

  it('refuses a job past its queue deadline and leaves it queued for the sweeper to expire', async () => {
    const job = await queued({ queueDeadlineAt: new Date(Date.now() - 1_000) });
    expect(await claim(job.id)).toBeNull();
    expect(await stack.db.job.findUnique({ where: { id: job.id }, select: { status: true, startedAt: true, attempts: true } })).toEqual({ status: 'queued', startedAt: null, attempts: 0 });
  });

  it('starts again a job handed back after its worker vanished, whatever its queue deadline', async () => {
    const job = await queued({ queueDeadlineAt: new Date(Date.now() - 1_000), attempts: 1 });
    expect((await claim(job.id))?.job).toMatchObject({ id: job.id, status: 'running', attempts: 2 });
  });
});
