// @stable-canvas/comfyui-client, unchanged, pointed at this API as at an engine: it calls every
// route without `/api` (its base path is the server root) and opens `/ws` at the root. The API key
// travels through the library's own hooks: its `fetch` and `WebSocket` options.
import { Client } from '@stable-canvas/comfyui-client';
import WebSocket from 'ws';
import { waitUntil } from '../support/jobs.js';
import { V1World, textToImage } from './v1-world.js';

describe('v1 with @stable-canvas/comfyui-client', () => {
  const world = new V1World();
  let client: Client;
  let key: string;

  beforeAll(async () => {
    await world.start();
    key = (await world.account()).key;
    const withKey: typeof fetch = (input, init = {}) => fetch(input, { ...init, headers: { ...(init.headers as Record<string, string>), 'X-API-Key': key } });
    class KeyedSocket extends WebSocket {
      constructor(url: string) {
        super(url, { headers: { 'x-api-key': key } });
      }
    }
    client = new Client({ api_host: new URL(world.url).host, api_base: '', clientId: 'stable-canvas-1', fetch: withKey, WebSocket: KeyedSocket as never });
  });
  afterAll(async () => {
    client?.close();
    await world.close();
  });

  // Its getLogs/getRawLogs pass an already absolute URL through its URL builder again
  // (`http://host/http:/host/internal/logs`), against any server: not called here.
  it('connects and reads what it reads at start: stats, nodes, models, users, settings, user data', async () => {
    const [stats] = await Promise.all([client.getSystemStats(), client.connect({ websocket: { enabled: true }, timeout_ms: 15_000 })]);
    expect(stats.system.comfyui_version).toBe('0.3.64');
    expect(Object.keys(await client.getNodeDefs())).toContain('KSampler');
    expect(await client.getSamplers()).toContain('euler');
    expect(await client.getExtensions()).toEqual([]);
    expect(await client.getEmbeddings()).toEqual([]);
    expect(await client.getSDModels()).toContain('v1-5-pruned-emaonly-fp16.safetensors');
    expect((await client.getModelFolders()).map((f) => f.name)).toContain('checkpoints');
    expect(await client.getModels('checkpoints')).toContainEqual({ name: 'v1-5-pruned-emaonly-fp16.safetensors', pathIndex: 0 });
    expect(await client.getUserConfig()).toEqual({ storage: 'server', migrated: false });

    expect(await client.getSettings()).toEqual({});
    await client.storeSettings({ 'Comfy.Locale': 'en' });
    await client.storeSetting('Comfy.LinkRenderMode', 2);
    expect(await client.getSettings()).toEqual({ 'Comfy.Locale': 'en', 'Comfy.LinkRenderMode': 2 });
    expect(await client.getSetting('Comfy.LinkRenderMode')).toBe(2);

    const workflow = { last_node_id: 0, nodes: [], links: [], extra: { from: 'stable-canvas' } };
    await client.storeUserData('workflows/from-client.json', workflow, { stringify: true });
    const stored = await client.getUserData('workflows/from-client.json');
    expect(await stored.json()).toEqual(workflow);
    expect(await client.getUserConfig()).toEqual({ storage: 'server', migrated: true });
  });

  it('queues a prompt over the WebSocket, then finds it in the history and an empty queue', async () => {
    const outputs = await client.enqueue(textToImage(3), { disable_random_seed: true });
    expect(outputs.images.length).toBeGreaterThan(0);
    // The library resolves on the socket's `execution_success`; the history entry is written as the
    // job's end is stored, a moment later.
    await waitUntil(async () => (await client.getHistory(5)).History.length > 0, 10_000, 'the prompt in the history');
    const queue = await client.getQueue();
    expect(queue).toEqual({ Running: [], Pending: [] });
  });
});
