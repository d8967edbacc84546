import { Blake3Hasher } from '@napi-rs/blake-hash';
import { EngineClient } from '#libs/engine-protocol';
import { slowJob } from '../support/cloud.js';
import { JobsProbe, waitUntil } from '../support/jobs.js';
import { memoryMiB } from '../support/processes.js';
import { TestStack } from '../support/stack.js';


describe('worker faults: never stuck, nothing lost', () => {
  const stack = new TestStack('local');
  let probe: JobsProbe;
  let account: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    probe = new JobsProbe(stack);
    account = await stack.account({ tier: 'enterprise' });
  });
  afterAll(async () => {
    await probe.close();
    await stack.close();
  });

  const startPair = async (id: string, port = '0') => {
    const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: port, SIM_STEP_MS: '10' });
    const worker = await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: id }, 'ready');
    return { engine, worker };
  };

  it('finishes a job on another worker when its worker is killed with SIGKILL mid-job', async () => {
    const a = await startPair('fault-a');
    const b = await startPair('fault-b');
    const jobId = await probe.place(account.id, slowJob(2500));
    const running = await probe.waitFor(jobId, ['running'], 15_000);
    const victim = running.workerId === 'fault-a' ? a.worker : b.worker;
    await victim.stop('SIGKILL');
    const done = await probe.waitFor(jobId, ['succeeded', 'failed'], 40_000);
    expect(done.status).toBe('succeeded');
    expect(done.attempts).toBe(2);
    expect(done.workerId).not.toBe(running.workerId);
    expect(await stack.db.jobOutput.count({ where: { jobId } })).toBe(1);
    expect(await stack.db.creditLedgerEntry.count({ where: { ref: jobId } })).toBe(1);
    for (const p of [a, b]) {
      await p.worker.stop();
      await p.engine.stop();
    }
  }, 90_000);

  it('runs the job again when its engine restarts mid-job and loses it', async () => {
    const pair = await startPair('fault-c');
    const port = String(pair.engine.port);
    const jobId = await probe.place(account.id, slowJob(3000));
    await probe.waitFor(jobId, ['running'], 15_000);
    await waitUntil(async () => (await stack.db.job.findUniqueOrThrow({ where: { id: jobId } })).enginePromptId !== null, 10_000, 'prompt submitted');
    await new Promise((r) => setTimeout(r, 500));
    await pair.engine.stop('SIGKILL');
    await new Promise((r) => setTimeout(r, 1500));
    const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: port, SIM_STEP_MS: '10' });
    const done = await probe.waitFor(jobId, ['succeeded', 'failed'], 45_000);
    expect(done.status).toBe('succeeded');
    expect(done.attempts).toBe(2);
    expect(await stack.db.jobOutput.count({ where: { jobId } })).toBe(1);
    await pair.worker.stop();
    await engine.stop();
  }, 90_000);

  it('fails clearly, not silently, when the engine never comes back', async () => {
    const pair = await startPair('fault-d');
    await stack.accounts.setLimits(account.id, {});
    const jobId = await probe.place(account.id, slowJob(2000));
    await probe.waitFor(jobId, ['running'], 15_000);
    await pair.engine.stop('SIGKILL');
    const done = await probe.waitFor(jobId, ['failed', 'succeeded', 'queued'], 60_000);
    // Handed back for another worker first (nothing else can run it here), it then waits; the
    // job is never left `running` on a worker that cannot run it.
    expect(['queued', 'failed']).toContain(done.status);
    if (done.status === 'failed') expect((done.error as { code: string }).code).toMatch(/engine_unavailable|worker_lost/);
    await stack.db.job.updateMany({ where: { id: jobId, status: 'queued' }, data: { status: 'canceled' } });
    await pair.worker.stop();
  }, 90_000);

  it('finishes the current job on SIGTERM within the grace period, then exits', async () => {
    const pair = await startPair('graceful-a');
    const jobId = await probe.place(account.id, slowJob(1500));
    await probe.waitFor(jobId, ['running'], 15_000);
    const exit = await pair.worker.stop('SIGTERM');
    expect(exit).toBe(0);
    const done = await stack.db.job.findUniqueOrThrow({ where: { id: jobId } });
    expect(done.status).toBe('succeeded');
    expect(done.attempts).toBe(1);
    await pair.engine.stop();
  }, 60_000);

  it('hands the job back on SIGTERM when it would outlast the grace period, and another worker runs it', async () => {
    const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '10' });
    const leaving = await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: 'graceful-b', WORKER_SHUTDOWN_GRACE_MS: '300' }, 'ready');
    const jobId = await probe.place(account.id, slowJob(3000));
    await probe.waitFor(jobId, ['running'], 15_000);
    let promptId: string | null = null;
    await waitUntil(async () => (promptId = (await stack.db.job.findUniqueOrThrow({ where: { id: jobId } })).enginePromptId) !== null, 10_000, 'prompt submitted');
    expect(await leaving.stop('SIGTERM')).toBe(0);
    const back = await stack.db.job.findUniqueOrThrow({ where: { id: jobId } });
    expect(back.status).toBe('queued');
    // The engine was told to stop the prompt it no longer runs for anyone.
    const direct = new EngineClient(engine.url);
    await waitUntil(async () => (await direct.history(promptId!)) !== undefined, 10_000, 'the left prompt ended on the engine');
    const left = await direct.history(promptId!);
    expect(left!.status!.messages.map(([type]) => type)).toContain('execution_interrupted');
    const other = await startPair('graceful-c');
    const done = await probe.waitFor(jobId, ['succeeded', 'failed'], 30_000);
    expect(done.status).toBe('succeeded');
    expect(done.workerId).toBe('graceful-c');
    expect(done.attempts).toBe(2);
    await other.worker.stop();
    await other.engine.stop();
    await engine.stop();
  }, 60_000);

  it('streams a 200 MB output with bounded worker memory, byte for byte', async () => {
    const pair = await startPair('fault-e');
    await new Promise((r) => setTimeout(r, 500));
    const baseline = memoryMiB(pair.worker.child.pid!);
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, memoryMiB(pair.worker.child.pid!))), 50);
    const size = 200 * 1024 * 1024;
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'SimLargeFile', inputs: { size_bytes: size, filename_prefix: 'big', seed: 7 } },
    });
    const done = await probe.waitFor(jobId, ['succeeded', 'failed'], 60_000);
    clearInterval(sampler);
    expect(done.status).toBe('succeeded');
    const out = await stack.db.jobOutput.findFirstOrThrow({ where: { jobId }, include: { asset: { include: { blob: true } } } });
    expect(Number(out.asset.blob.sizeBytes)).toBe(size);
    expect(out.type).toBe('file');
    // The engine's bytes, hashed as they stream, match the stored blob's hash.
    const hasher = new Blake3Hasher();
    for await (const chunk of await new EngineClient(pair.engine.url).view({ filename: out.name, subfolder: '', type: 'output' })) hasher.update(chunk as Buffer);
    expect(out.asset.blobHash).toBe(hasher.digest('hex'));
    // Never held whole: well under the 200 MB. Through /view each socket read is a new Buffer, and
    // V8 may leave up to its 64 MiB external-memory limit of spent ones for the next collection
    // (libs/runtime), so a run grows by 37-39 MiB or, when no collection falls inside the
    // transfer, by 100-106 MiB (both seen on the same machine). The bench's 64 MiB target is for
    // the path the pods use, the engine's folder (bench/output-latency.mjs: under 1 MiB).
    expect(peak - baseline).toBeLessThan(128);
    await pair.worker.stop();
    await pair.engine.stop();
  }, 120_000);
});
