import { Blake3Hasher } from '@napi-rs/blake-hash';
import { blake3Hex } from '#libs/storage';
import { EngineClient } from '#libs/engine-protocol';
import { JobsProbe } from '../support/jobs.js';
import { asTenantPng } from '../support/media.js';
import { S3BlobStoreProbe } from '../support/blobs.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';

// A worker that sees its engine's output folder (ENGINE_OUTPUT_DIR) reads outputs from the disk
// rather than through GET /view: what it stores must be the very bytes /view serves.
describe('outputs read from the engine output folder', () => {
  const stack = new TestStack('local');
  let probe: JobsProbe;
  let engine: RunningProcess;
  let account: { id: string; key: string };
  const outputDir = `/tmp/${stack.name}/engine-output`;

  beforeAll(async () => {
    await stack.open();
    probe = new JobsProbe(stack);
    engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '1', SIM_OUTPUT_DIR: outputDir });
    await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: 'w-dir', ENGINE_OUTPUT_DIR: outputDir }, 'ready');
    account = await stack.account();
  });
  afterAll(async () => {
    await probe.close();
    await stack.close();
  });

  it('stores a saved image and a large file byte for byte as the engine serves them, with their blake3', async () => {
    const size = 24 * 1024 * 1024 + 17;
    const workflow = {
      '1': { class_type: 'EmptyImage', inputs: { width: 64, height: 64, batch_size: 1, color: 0x336699 } },
      '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'dir' } },
      '3': { class_type: 'SimLargeFile', inputs: { size_bytes: size, filename_prefix: 'big', seed: 11 } },
    };
    const jobId = await probe.place(account.id, workflow);
    const job = await probe.waitFor(jobId, ['succeeded', 'failed'], 60_000);
    expect(job.error).toBeNull();
    expect(job.status).toBe('succeeded');
    const outputs = await stack.db.jobOutput.findMany({ where: { jobId }, include: { asset: { include: { blob: true } } }, orderBy: { nodeId: 'asc' } });
    expect(outputs.map((o) => o.nodeId)).toEqual(['2', '3']);
    const view = new EngineClient(engine.url);

    const image = outputs[0]!;
    expect(image.asset.contentType).toBe('image/png');
    const sent = (await stack.db.$queryRaw<{ w: string }[]>`SELECT workflow::text AS w FROM jobs WHERE id = ${jobId}::uuid`)[0]!.w;
    const served = await asTenantPng(Buffer.concat(await (await view.view({ filename: image.name, subfolder: '', type: 'output' })).toArray()), JSON.parse(sent));
    const storedImage = await S3BlobStoreProbe.read(stack, image.asset.blobHash);
    expect(storedImage.equals(served)).toBe(true);
    expect(image.asset.blobHash).toBe(blake3Hex(served));

    const file = outputs[1]!;
    expect(Number(file.asset.blob.sizeBytes)).toBe(size);
    const hasher = new Blake3Hasher();
    for await (const chunk of await view.view({ filename: file.name, subfolder: '', type: 'output' })) hasher.update(chunk as Buffer);
    expect(file.asset.blobHash).toBe(hasher.digest('hex'));
    expect(blake3Hex(await S3BlobStoreProbe.read(stack, file.asset.blobHash))).toBe(file.asset.blobHash);
  });
});
