import type { EngineClient } from '#libs/engine-protocol';
import { startWorkerBehindProxy, type EngineProxy } from '../support/engine-proxy.js';
import { JobsProbe, waitUntil } from '../support/jobs.js';
import { asTenantPng } from '../support/media.js';
import { TestStack } from '../support/stack.js';

/**
 * The worker reaches its engine through a proxy the tests can break, while the engine runs on.
 * The execution timeout is far beyond every wait here: a job that only ends by timing out fails
 * these tests rather than passing late.
 */
describe('worker and engine: a broken link loses no job', () => {
  const stack = new TestStack('local');
  let probe: JobsProbe;
  let direct: EngineClient;
  let proxy: EngineProxy;
  let account: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    probe = new JobsProbe(stack);
    ({ proxy, direct } = await startWorkerBehindProxy(stack, { WORKER_ID: 'link-w1', JOB_EXECUTION_TIMEOUT_SECONDS: '300', ENGINE_STALL_TIMEOUT_MS: '1000' }));
    account = await stack.account({ tier: 'enterprise' });
  });
  afterEach(() => {
    proxy.restoreSockets();
    proxy.releaseViews();
    proxy.releasePrompts();
  });
  afterAll(async () => {
    await probe.close();
    await proxy.close();
    await stack.close();
  });

  /** Runs until the prompt is on the engine, then cuts the worker's socket for the rest of the run. */
  async function cutWhileRunning(jobId: string): Promise<string> {
    let promptId: string | null = null;
    await waitUntil(async () => {
      promptId = (await stack.db.job.findUniqueOrThrow({ where: { id: jobId } })).enginePromptId;
      if (!promptId) return false;
      const q = await direct.queue();
      return q.queue_running.some((item) => item[1] === promptId);
    }, 15_000, 'prompt running on the engine');
    proxy.cutSockets();
    // The engine finishes the prompt while the worker cannot hear it.
    await waitUntil(async () => (await direct.history(promptId!)) !== undefined, 20_000, 'prompt finished on the engine');
    return promptId!;
  }

  it('finishes a job whose end the socket missed, with the outputs it never heard of', async () => {
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0x102030 } },
      '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms: 1500 } },
      '3': { class_type: 'ImageInvert', inputs: { image: ['2', 0] } },
      '4': { class_type: 'SaveImage', inputs: { images: ['3', 0], filename_prefix: 'after_cut' } },
    });
    await cutWhileRunning(jobId);
    // The socket comes back: the engine has nothing more to say about this prompt.
    proxy.restoreSockets();
    const job = await probe.waitFor(jobId, ['succeeded', 'failed', 'expired', 'queued'], 30_000);
    expect(job.error).toBeNull();
    expect(job.status).toBe('succeeded');
    expect(job.attempts).toBe(1);
    const outputs = await stack.db.jobOutput.findMany({ where: { jobId } });
    expect(outputs.map((o) => [o.nodeId, o.type])).toEqual([['4', 'image']]);
    expect(outputs[0]!.name).toMatch(/^after_cut_/);
  }, 60_000);

  it('reports the node error the socket missed, while the socket stays down', async () => {
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
      '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms: 1500 } },
      '3': { class_type: 'SimFail', inputs: { source: ['2', 0], exception_type: 'ValueError', message: 'unheard failure' } },
    });
    await cutWhileRunning(jobId);
    const job = await probe.waitFor(jobId, ['succeeded', 'failed', 'expired', 'queued'], 30_000);
    expect(job.status).toBe('failed');
    expect(job.error).toMatchObject({ code: 'node_execution_error', node_id: '3', class_type: 'SimFail', exception_type: 'ValueError' });
    expect((job.error as { message: string }).message).toBe('unheard failure');
  }, 60_000);

  it('runs nothing on the engine for a job canceled while its prompt was on the way there', async () => {
    proxy.holdPrompts();
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
      '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms: 5000 } },
      '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'orphan' } },
    });
    await waitUntil(() => proxy.heldPromptCount === 1, 15_000, 'the prompt on its way to the engine');
    const promptId = (await stack.db.job.findUniqueOrThrow({ where: { id: jobId } })).enginePromptId!;
    await probe.cancel(jobId);
    // The worker hears the cancel at once (pub/sub); give it time to act before the prompt lands.
    await new Promise((r) => setTimeout(r, 1000));
    proxy.releasePrompts();
    expect((await probe.waitFor(jobId, ['canceled', 'succeeded', 'failed'], 15_000)).status).toBe('canceled');
    // Nothing of it is left on the engine: neither waiting, nor running, nor run to its end.
    await waitUntil(async () => {
      const q = await direct.queue();
      return ![...q.queue_running, ...q.queue_pending].some((item) => item[1] === promptId);
    }, 3_000, 'the prompt gone from the engine queue');
    expect((await direct.history(promptId))?.status?.status_str ?? 'never ran').not.toBe('success');
  }, 60_000);

  it('gives up on an output download the engine stops answering, and stores the output on a later try', async () => {
    proxy.stallViews();
    const before = proxy.viewRequests;
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0xaabbcc } },
      '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'stalled' } },
    });
    // A second request for the output means the worker abandoned the first one.
    await waitUntil(() => proxy.viewRequests >= before + 2, 20_000, 'the stalled download abandoned and tried again');
    proxy.releaseViews();
    const job = await probe.waitFor(jobId, ['succeeded', 'failed'], 30_000);
    expect(job.error).toBeNull();
    expect(job.status).toBe('succeeded');
    const out = await stack.db.jobOutput.findFirstOrThrow({ where: { jobId }, include: { asset: { include: { blob: true } } } });
    const parts: Buffer[] = [];
    for await (const chunk of await direct.view({ filename: out.name, subfolder: '', type: 'output' })) parts.push(chunk as Buffer);
    const workflow = JSON.parse((await stack.db.$queryRaw<{ w: string }[]>`SELECT workflow::text AS w FROM jobs WHERE id = ${jobId}::uuid`)[0]!.w);
    expect(Number(out.asset.blob.sizeBytes)).toBe((await asTenantPng(Buffer.concat(parts), workflow)).length);
  }, 60_000);
});
