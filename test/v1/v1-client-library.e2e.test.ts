// A widely used ComfyUI client library, unchanged, pointed at this API: `{base}/api` as its engine
// address and the API key as a custom header (REST and the WebSocket upgrade alike).
import { CallWrapper, ComfyApi, PromptBuilder } from '@saintno/comfyui-sdk';
import { blake3Hex } from '#libs/storage';
import { decodePng } from '../../apps/api/src/v1/images/png.js';
import { waitUntil } from '../support/jobs.js';
import { V1World, testPng, textToImage } from './v1-world.js';

function run(api: ComfyApi, workflow: PromptBuilder<string, string, any>, events: { previews: number; progress: number }): Promise<any> {
  return new Promise((resolve, reject) => {
    new CallWrapper(api, workflow)
      .onPreview(() => events.previews++)
      .onProgress(() => events.progress++)
      .onFinished((outputs) => resolve(outputs))
      .onFailed((err) => reject(err))
      .run();
  });
}

describe('v1 with @saintno/comfyui-sdk', () => {
  const world = new V1World();
  let account: { id: string; key: string };
  let api: ComfyApi;
  let connected: Promise<void>;

  beforeAll(async () => {
    await world.start();
    account = await world.account();
    api = new ComfyApi(`${world.url}/api`, 'sdk-client-1', { credentials: { type: 'custom', headers: { 'X-API-Key': account.key } } });
    connected = new Promise((resolve) => api.on('connected', () => resolve()));
    await api.init(5, 500).waitForReady();
  });
  afterAll(async () => {
    api?.destroy();
    await world.close();
  });

  it('connects, uploads, queues prompts, waits for them and fetches their images', async () => {
    await connected;
    expect(api.osType).toBe('posix');

    // Text to image, the library's own example shape.
    const events = { previews: 0, progress: 0 };
    const t2i = new PromptBuilder(textToImage(10), ['seed', 'steps', 'positive'], ['images'])
      .setInputNode('seed', '3.inputs.seed')
      .setInputNode('steps', '3.inputs.steps')
      .setInputNode('positive', '6.inputs.text')
      .setOutputNode('images', '9')
      .input('seed', 1234)
      .input('steps', 10)
      .input('positive', 'a lighthouse at dusk');
    const generated = await run(api, t2i, events);
    const image = generated.images.images[0];
    expect(image).toEqual({ filename: expect.stringMatching(/\.png$/), subfolder: expect.any(String), type: 'output' });
    // The library listens for previews and progress only once it saw the prompt start executing
    // (and asked for its history), so the first steps may pass unseen.
    expect(events.previews).toBeGreaterThan(0);
    expect(events.progress).toBeGreaterThan(0);
    const blob = await api.getImage(image);
    const bytes = Buffer.from(await blob.arrayBuffer());
    const row = await world.stack.db.jobOutput.findFirstOrThrow({ where: { jobId: image.subfolder, nodeId: '9' }, include: { asset: true } });
    expect(blake3Hex(bytes)).toBe(row.asset.blobHash);
    expect(decodePng(bytes).width).toBe(64);

    // Upload an image and use it in a later prompt.
    const png = testPng(20, 10, 4);
    const uploaded = await api.uploadImage(png, 'input.png');
    expect(uploaded).not.toBe(false);
    if (!uploaded) return;
    expect(uploaded.info.filename).toBe(`${blake3Hex(png)}.png`);
    const scale = new PromptBuilder(
      {
        '1': { class_type: 'LoadImage', inputs: { image: '' }, _meta: { title: 'Load' } },
        // A pause so the library has subscribed before the outputs arrive, as with real node times.
        '2': { class_type: 'SimSleep', inputs: { ms: 300, source: ['1', 0] }, _meta: { title: 'Pause' } },
        '3': { class_type: 'ImageScale', inputs: { image: ['2', 0], upscale_method: 'nearest-exact', width: 10, height: 5, crop: 'disabled' }, _meta: { title: 'Scale' } },
        '4': { class_type: 'SaveImage', inputs: { images: ['3', 0], filename_prefix: 'sdk' }, _meta: { title: 'Save' } },
      },
      ['image'],
      ['scaled'],
    )
      .setInputNode('image', '1.inputs.image')
      .setOutputNode('scaled', '4')
      .input('image', uploaded.info.filename);
    const scaled = await run(api, scale, { previews: 0, progress: 0 });
    const out = decodePng(Buffer.from(await (await api.getImage(scaled.scaled.images[0])).arrayBuffer()));
    expect([out.width, out.height]).toEqual([10, 5]);

    // The library's queue and history calls see the finished prompts (the job is done a moment
    // after its last output, as on the engine).
    await waitUntil(async () => (await api.getQueue()).queue_running.length === 0, 5_000, 'an empty queue');
    expect(await api.getQueue()).toEqual({ queue_running: [], queue_pending: [] });
    const history = await api.getHistory(image.subfolder);
    expect(history?.status?.completed).toBe(true);
  });
});
