import type { EngineClient } from '#libs/engine-protocol';
import { lateJobsQuery } from '#libs/jobs';
import { startWorkerBehindProxy, type EngineProxy } from '../support/engine-proxy.js';
import { JobsProbe, waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';

/**
 * A job whose engine finished within its run deadline, but whose outputs are still being stored
 * when the deadline passes: the sweeper's backstop for running jobs (it expires those past their
 * run deadline, after a grace) must not take it, whatever the grace.
 */
describe('worker: storing outputs past the run deadline', () => {
  const stack = new TestStack('local');
  let probe: JobsProbe;
  let direct: EngineClient;
  let proxy: EngineProxy;

  beforeAll(async () => {
    await stack.open();
    probe = new JobsProbe(stack);
    ({ proxy, direct } = await startWorkerBehindProxy(stack, { WORKER_ID: 'deadline-w1', JOB_EXECUTION_TIMEOUT_SECONDS: '3', ENGINE_STALL_TIMEOUT_MS: '30000' }));
  });
  afterAll(async () => {
    proxy.releaseViews();
    await probe.close();
    await proxy.close();
    await stack.close();
  });

  it('is not late while the engine is done and its outputs are on their way', async () => {
    const account = await stack.account({ tier: 'enterprise' });
    proxy.stallViews();
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0x405060 } },
      '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms: 1000 } },
      '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'slow_store' } },
    });
    const running = await probe.waitFor(jobId, ['running'], 15_000);
    await waitUntil(async () => (await direct.history(running.enginePromptId!)) !== undefined, 15_000, 'prompt finished on the engine');

    // The deadline passes while the output's download is held up.
    const deadline = running.runDeadlineAt!.getTime();
    await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now()) + 500));
    const now = new Date();
    const late = await stack.db.$queryRaw<{ id: string }[]>(lateJobsQuery(now, now, 100));
    expect(late.map((j) => j.id)).not.toContain(jobId);
    expect((await stack.db.job.findUniqueOrThrow({ where: { id: jobId } })).status).toBe('running');

    proxy.releaseViews();
    const job = await probe.waitFor(jobId, ['succeeded', 'failed', 'expired'], 30_000);
    expect(job.error).toBeNull();
    expect(job.status).toBe('succeeded');
    const outputs = await stack.db.jobOutput.findMany({ where: { jobId } });
    expect(outputs.map((o) => [o.nodeId, o.type])).toEqual([['3', 'image']]);
  }, 60_000);
});
