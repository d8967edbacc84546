import { readFileSync } from 'node:fs';
import { blake3Hex } from '#libs/storage';
import { EngineClient } from '#libs/engine-protocol';
import { JobsProbe, waitUntil } from '../support/jobs.js';
import { asTenantPng } from '../support/media.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';

const textToImage = JSON.parse(readFileSync('test/fixtures/text-to-image.json', 'utf8')) as Record<string, any>;

function withSeed(seed: number, steps = 20) {
  const wf = structuredClone(textToImage);
  wf['3'].inputs.seed = seed;
  wf['3'].inputs.steps = steps;
  wf['5'].inputs.width = 64;
  wf['5'].inputs.height = 64;
  return wf;
}

async function bytesOf(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(Buffer.from(c as Buffer));
  return Buffer.concat(parts);
}

describe('worker driving the sim-engine', () => {
  const stack = new TestStack('s3');
  let probe: JobsProbe;
  let engine: RunningProcess;
  let account: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    probe = new JobsProbe(stack);
    engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '30' });
    await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: 'w1' }, 'ready');
    account = await stack.account();
  });
  afterAll(async () => {
    await probe.close();
    await stack.close();
  });

  it('runs the text-to-image workflow to stored outputs whose bytes and hashes match the engine\'s', async () => {
    const jobId = await probe.place(account.id, withSeed(42));
    const job = await probe.waitFor(jobId, ['succeeded', 'failed'], 30_000);
    expect(job.error).toBeNull();
    expect(job.status).toBe('succeeded');
    expect(job.queueMs).not.toBeNull();
    expect(job.executionMs).not.toBeNull();
    expect((job.progress as any).value).toBe(1);
    const outputs = await stack.db.jobOutput.findMany({ where: { jobId }, include: { asset: { include: { blob: true } } } });
    expect(outputs).toHaveLength(1);
    const out = outputs[0]!;
    expect(out).toMatchObject({ nodeId: '9', type: 'image', engineKey: 'images', engineType: 'output' });
    expect(out.asset.contentType).toBe('image/png');
    // The same bytes the engine serves for that output, but for the prompt it embeds: the tenant's.
    const sent = (await stack.db.$queryRaw<{ w: string }[]>`SELECT workflow::text AS w FROM jobs WHERE id = ${jobId}::uuid`)[0]!.w;
    const engineBytes = await asTenantPng(await bytesOf(await new EngineClient(engine.url).view({ filename: out.name, subfolder: '', type: 'output' })), JSON.parse(sent));
    const { S3BlobStoreProbe } = await import('../support/blobs.js');
    const storedBytes = await S3BlobStoreProbe.read(stack, out.asset.blobHash);
    expect(storedBytes.equals(engineBytes)).toBe(true);
    expect(out.asset.blobHash).toBe(blake3Hex(engineBytes));
    expect(Number(out.asset.blob.sizeBytes)).toBe(engineBytes.length);
    expect(engineBytes.subarray(1, 4).toString()).toBe('PNG');
  });

  it('reports progress snapshots in order, ending at 1.0', async () => {
    const jobId = await probe.place(account.id, withSeed(7, 60));
    await probe.waitFor(jobId, ['succeeded'], 30_000);
    const events = await probe.redis.xrange(probe.keys.events(jobId), '-', '+');
    const progress = events.filter(([, f]) => f[1] === 'progress').map(([, f]) => JSON.parse(f[3]!).value as number);
    expect(progress.length).toBeGreaterThan(2);
    for (let i = 1; i < progress.length; i++) expect(progress[i]!).toBeGreaterThanOrEqual(progress[i - 1]!);
    expect(progress[progress.length - 1]).toBe(1);
    const statuses = events.filter(([, f]) => f[1] === 'status').map(([, f]) => JSON.parse(f[3]!).status);
    expect(statuses).toEqual(['running', 'succeeded']);
    const outputEvents = events.filter(([, f]) => f[1] === 'output');
    expect(outputEvents).toHaveLength(1);
  });

  it('logs nothing after the terminal status, however the throttles stood when the run ended', async () => {
    // Previews come every step (30 ms) and go out at most every 500 ms, so when the sampler ends
    // one is nearly always waiting for its turn. Several short runs make that certain.
    for (const seed of [11, 12, 13]) {
      const jobId = await probe.place(account.id, withSeed(seed, 12));
      await probe.waitFor(jobId, ['succeeded'], 30_000);
      // Longer than the throttles' interval: anything still pending has fired by now.
      await new Promise((r) => setTimeout(r, 700));
      const names = (await probe.redis.xrange(probe.keys.events(jobId), '-', '+')).map(([, f]) => f[1]);
      expect(names).toContain('preview');
      expect(names.at(-1)).toBe('status');
      expect(names.filter((n) => n === 'status')).toHaveLength(2);
    }
  });

  it('stores every kind of output the engine reports: image, video, audio, text and plain files', async () => {
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 16, height: 16, batch_size: 3, color: 0x336699 } },
      '2': { class_type: 'SimSaveVideo', inputs: { images: ['1', 0], filename_prefix: 'video/clip', fps: 8 } },
      '3': { class_type: 'SimAudioTone', inputs: { seconds: 0.2, frequency: 440, sample_rate: 8000 } },
      '4': { class_type: 'SaveAudio', inputs: { audio: ['3', 0], filename_prefix: 'audio/tone' } },
      '5': { class_type: 'PrimitiveString', inputs: { value: 'hello from the engine' } },
      '6': { class_type: 'PreviewAny', inputs: { source: ['5', 0] } },
      '7': { class_type: 'SimLargeFile', inputs: { size_bytes: 1000, filename_prefix: 'blob', seed: 1 } },
      '8': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'frames' } },
    });
    const job = await probe.waitFor(jobId, ['succeeded', 'failed'], 30_000);
    expect(job.error).toBeNull();
    const outputs = await stack.db.jobOutput.findMany({ where: { jobId }, include: { asset: true }, orderBy: { id: 'asc' } });
    const byNode = (id: string) => outputs.filter((o) => o.nodeId === id);
    expect(byNode('2').map((o) => [o.type, o.asset.contentType])).toEqual([['video', 'video/x-msvideo']]);
    expect(byNode('4').map((o) => [o.type, o.asset.contentType])).toEqual([['audio', 'audio/flac']]);
    expect(byNode('6').map((o) => [o.type, o.engineKey])).toEqual([['text', 'text']]);
    expect(byNode('7').map((o) => o.type)).toEqual(['file']);
    expect(byNode('8').map((o) => o.type)).toEqual(['image', 'image', 'image']);
    const { S3BlobStoreProbe } = await import('../support/blobs.js');
    const video = await S3BlobStoreProbe.read(stack, byNode('2')[0]!.asset.blobHash);
    expect(video.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(video.subarray(8, 12).toString('latin1')).toBe('AVI ');
    expect((await S3BlobStoreProbe.read(stack, byNode('6')[0]!.asset.blobHash)).toString()).toBe('hello from the engine');
  });

  it('fails with the node id when a node raises', async () => {
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
      '2': { class_type: 'SimFail', inputs: { source: ['1', 0], exception_type: 'RuntimeError', message: 'kaboom' } },
    });
    const job = await probe.waitFor(jobId, ['failed', 'succeeded'], 30_000);
    expect(job.status).toBe('failed');
    expect(job.error).toMatchObject({ code: 'node_execution_error', node_id: '2', class_type: 'SimFail' });
    expect((job.error as any).message).toContain('kaboom');
    expect((job.error as any).traceback).toBeTruthy();
  });

  it('fails a workflow the engine refuses with what the engine said was wrong, and where', async () => {
    // Placed directly, past the API's own validation: the engine's 400 is what the worker meets.
    const jobId = await probe.place(account.id, {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
      '2': { class_type: 'SaveImage', inputs: { filename_prefix: 'no_images' } },
    });
    const job = await probe.waitFor(jobId, ['failed', 'succeeded'], 30_000);
    expect(job.status).toBe('failed');
    expect(job.attempts).toBe(1);
    expect(job.error).toMatchObject({ code: 'prompt_rejected', node_id: '2', class_type: 'SaveImage' });
    expect((job.error as { message: string }).message).toContain('Required input is missing: images');
  });

  it('cancels mid-sampler within one step time', async () => {
    const wf = withSeed(9, 200);
    const jobId = await probe.place(account.id, wf);
    await waitUntil(async () => {
      const j = await stack.db.job.findUniqueOrThrow({ where: { id: jobId } });
      return j.status === 'running' && ((j.progress as any)?.step ?? 0) >= 2;
    }, 20_000, 'sampler steps');
    const asked = Date.now();
    await probe.cancel(jobId);
    const job = await probe.waitFor(jobId, ['canceled', 'succeeded', 'failed'], 10_000);
    expect(job.status).toBe('canceled');
    // Step time is 30 ms; allow for the bookkeeping around it.
    expect(job.completedAt!.getTime() - asked).toBeLessThan(1500);
    expect(job.chargedCredits).not.toBeNull();
  });
});
