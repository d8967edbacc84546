import { decodePng } from '../../apps/api/src/v1/images/png.js';
import { call, type Reply } from '../support/http.js';
import { V1World, testPng } from './v1-world.js';

// What the ComfyUI front end reads besides prompts and files: the template index and the stock
// graph a new browser starts on, the model library, the log terminal, folder paths and file
// lists, translations. Against the real API, worker and simulated engine, per account.

type Ui = { nodes: Array<{ id: number; type: string; inputs: Array<{ name: string; link: number | null }>; widgets_values: unknown[] }>; links: Array<[number, number, number, number, number, string]> };
type Defs = Record<string, { input: { required?: Record<string, any[]>; optional?: Record<string, any[]> }; input_order?: { required?: string[]; optional?: string[] } }>;

const WIDGET_TYPES = new Set(['INT', 'FLOAT', 'STRING', 'BOOLEAN', 'COMBO']);

/**
 * The front end's graph-to-prompt step, as far as this graph needs it: links become
 * `[node, slot]`, widget values fill the other inputs in definition order, and a seed's
 * "control after generate" value is the front end's own, never sent.
 */
function uiToPrompt(ui: Ui, defs: Defs): Record<string, { class_type: string; inputs: Record<string, unknown> }> {
  const prompt: Record<string, { class_type: string; inputs: Record<string, unknown> }> = {};
  for (const node of ui.nodes) {
    const def = defs[node.type]!;
    const inputs: Record<string, unknown> = {};
    for (const slot of node.inputs) {
      const link = ui.links.find((l) => l[0] === slot.link);
      if (link) inputs[slot.name] = [String(link[1]), link[2]];
    }
    const names = [...(def.input_order?.required ?? Object.keys(def.input.required ?? {})), ...(def.input_order?.optional ?? [])];
    let w = 0;
    for (const name of names) {
      if (name in inputs) continue;
      const spec = def.input.required?.[name] ?? def.input.optional?.[name];
      if (!spec || !(Array.isArray(spec[0]) || WIDGET_TYPES.has(spec[0]))) continue;
      if (w >= node.widgets_values.length) break;
      inputs[name] = node.widgets_values[w++];
      if (spec[1]?.control_after_generate || name === 'seed' || name === 'noise_seed') w++;
    }
    prompt[String(node.id)] = { class_type: node.type, inputs };
  }
  return prompt;
}

describe('v1 routes the front end reads', () => {
  const world = new V1World();
  let alice: { id: string; key: string };
  let bob: { id: string; key: string };

  beforeAll(async () => {
    await world.start();
    alice = await world.account();
    bob = await world.account();
  });
  afterAll(() => world.close());

  const get = (key: string | null, path: string): Promise<Reply> => world.get(key, path);
  const patch = (key: string, path: string, body: unknown): Promise<Reply> =>
    call(`${world.url}${path}`, { method: 'PATCH', headers: { 'x-api-key': key }, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('serves a template index whose stock graph runs as loaded, with its picture', async () => {
    const index = await get(alice.key, '/templates/index.json');
    expect(index.status).toBe(200);
    // The front end keeps the index only when it is declared JSON.
    expect(index.headers.get('content-type')).toContain('application/json');
    const stock = index.body.find((c: { moduleName: string }) => c.moduleName === 'default').templates.find((t: { name: string }) => t.name === 'default');
    expect(stock).toMatchObject({ name: 'default', mediaType: 'image', mediaSubtype: 'png', description: expect.any(String) });

    const picture = await fetch(`${world.url}/templates/${stock.name}-1.${stock.mediaSubtype}`, { headers: { 'x-api-key': alice.key } });
    expect(picture.headers.get('content-type')).toBe('image/png');
    expect(decodePng(Buffer.from(await picture.arrayBuffer())).width).toBe(512);

    const graph = await get(alice.key, `/templates/${stock.name}.json`);
    expect(graph.status).toBe(200);
    const ui = graph.body as Ui;
    expect(ui.nodes.map((n) => n.type).sort()).toEqual(['CLIPTextEncode', 'CLIPTextEncode', 'CheckpointLoaderSimple', 'EmptyLatentImage', 'KSampler', 'SaveImage', 'VAEDecode']);
    const checkpoints = (await get(alice.key, '/models/checkpoints')).body as string[];
    const loader = ui.nodes.find((n) => n.type === 'CheckpointLoaderSimple')!;
    expect(checkpoints).toContain(loader.widgets_values[0]);

    // Converted as the front end converts it, and queued without /api: it runs and saves an image.
    const defs = (await get(alice.key, '/object_info')).body as Defs;
    const prompt = uiToPrompt(ui, defs);
    const queued = await world.post(alice.key, '/prompt', { prompt, client_id: 'browser-1', extra_data: { extra_pnginfo: { workflow: ui } } });
    expect([queued.status, queued.body.node_errors]).toEqual([200, {}]);
    expect(await world.waitStatus(alice.key, queued.body.prompt_id, ['success', 'error'], { timeoutMs: 30_000 })).toBe('success');
    const history = (await get(alice.key, `/history/${queued.body.prompt_id}`)).body[queued.body.prompt_id];
    expect(history.outputs['9'].images).toHaveLength(1);

    // Files the index does not name: the engine's static 404.
    for (const path of ['/templates/index.fr.json', '/templates/fuse_options.json', '/templates/..%2F..%2Fpackage.json']) {
      const missing = await get(alice.key, path);
      expect([path, missing.status, missing.text]).toEqual([path, 404, '404: Not Found']);
    }
    expect((await get(null, '/templates/index.json')).status).toBe(401);
    for (const path of ['/workflow_templates', '/api/workflow_templates']) expect([path, (await get(alice.key, path)).body]).toEqual([path, {}]);
  });

  it('lists models for the model library without engine paths, and answers view_metadata as for a model without metadata', async () => {
    const folders = (await get(alice.key, '/experiment/models')).body as Array<{ name: string; folders: string[] }>;
    expect(folders.map((f) => f.name)).toEqual(expect.arrayContaining(['checkpoints', 'loras', 'vae']));
    expect(folders.map((f) => f.name)).not.toContain('configs');
    expect(folders.map((f) => f.name)).not.toContain('custom_nodes');
    expect(folders.every((f) => Array.isArray(f.folders) && f.folders.length === 0)).toBe(true);
    const names = (await get(alice.key, '/models/checkpoints')).body as string[];
    expect((await get(alice.key, '/api/experiment/models/checkpoints')).body).toEqual(names.map((name) => ({ name, pathIndex: 0 })));
    expect((await get(alice.key, '/experiment/models/no_such_folder')).status).toBe(404);
    expect((await get(alice.key, '/models/no_such_folder')).status).toBe(404);
    expect((await get(alice.key, '/embeddings')).body).toEqual([]);

    expect((await get(alice.key, `/view_metadata/checkpoints?filename=${encodeURIComponent(names[0]!)}`)).status).toBe(404);
    expect((await get(alice.key, '/api/view_metadata/checkpoints')).status).toBe(404);
    expect((await get(alice.key, '/view_metadata/checkpoints?filename=not-a-model.safetensors')).status).toBe(404);

    const paths = (await get(alice.key, '/internal/folder_paths')).body as Record<string, string[]>;
    expect(Object.keys(paths).sort()).toEqual(((await get(alice.key, '/models')).body as string[]).sort());
    expect(Object.values(paths).flat()).toEqual([]);
    expect((await get(alice.key, '/api/i18n')).body).toEqual({});
    expect((await get(alice.key, '/i18n')).body).toEqual({});
  });

  it('lists the account\'s own input files, and no output or temp file outside a prompt\'s folder', async () => {
    const carol = await world.account();
    const first = (await world.upload(carol.key, testPng(4, 4, 1), 'a.png')).body.name;
    const second = (await world.upload(carol.key, testPng(4, 4, 2), 'b.png')).body.name;
    expect((await get(carol.key, '/internal/files/input')).body).toEqual([second, first]);
    expect((await get(carol.key, '/api/internal/files/input')).body).toEqual([second, first]);
    expect((await get(bob.key, '/internal/files/input')).body).toEqual([]);
    expect((await get(carol.key, '/internal/files/output')).body).toEqual([]);
    expect((await get(carol.key, '/internal/files/temp')).body).toEqual([]);
    const bad = await get(carol.key, '/internal/files/models');
    expect([bad.status, bad.body]).toEqual([400, { error: 'Invalid directory type' }]);
  });

  it("shows an account only its own jobs' log lines, never the engine's, and pushes them to subscribed sockets", async () => {
    const fail = (marker: string) => ({ '1': { class_type: 'SimFail', inputs: { message: marker, exception_type: 'RuntimeError' } } });
    const aliceJob = await world.prompt(alice.key, fail('alice-marker-4711'));
    const bobJob = await world.prompt(bob.key, fail('bob-marker-0815'));
    for (const [key, id] of [[alice.key, aliceJob], [bob.key, bobJob]] as const) expect(await world.waitStatus(key, id, ['error'])).toBe('error');

    const raw = (await get(alice.key, '/internal/logs/raw')).body;
    expect(raw.size).toEqual({ cols: 80, rows: 24 });
    expect(raw.entries.length).toBeGreaterThan(0);
    expect(raw.entries.every((e: { t: unknown; m: unknown }) => typeof e.t === 'string' && typeof e.m === 'string')).toBe(true);
    const aliceText = raw.entries.map((e: { m: string }) => e.m).join('');
    expect(aliceText).toContain('alice-marker-4711');
    expect(aliceText).not.toContain('bob-marker-0815');
    // The engine's own start-up lines belong to no job.
    expect(aliceText).not.toContain('To see the GUI');
    for (const path of ['/internal/logs', '/api/internal/logs']) {
      const text = (await get(alice.key, path)).body as string;
      expect(typeof text).toBe('string');
      expect(text).toContain(`${raw.entries[0].t} - ${raw.entries[0].m}`);
      expect(text).not.toContain('bob-marker-0815');
    }
    expect(((await get(bob.key, '/internal/logs')).body as string)).not.toContain('alice-marker-4711');
    const fresh = await world.account();
    expect((await get(fresh.key, '/internal/logs/raw')).body).toEqual({ entries: [], size: { cols: 80, rows: 24 } });
    expect((await get(fresh.key, '/internal/logs')).body).toBe('');

    // Subscribed client ids get each job's lines as a `logs` message when the job ends.
    const aliceSocket = await world.socket(alice.key, { clientId: 'alice-terminal' });
    const bobSocket = await world.socket(bob.key, { clientId: 'bob-terminal' });
    expect((await patch(alice.key, '/internal/logs/subscribe', { clientId: 'alice-terminal', enabled: true })).status).toBe(200);
    expect((await patch(bob.key, '/api/internal/logs/subscribe', { clientId: 'bob-terminal', enabled: true })).status).toBe(200);
    // Another account naming Alice's client id subscribes its own sockets of that name, not hers.
    expect((await patch(bob.key, '/internal/logs/subscribe', { clientId: 'alice-terminal', enabled: true })).status).toBe(200);
    const second = await world.prompt(alice.key, fail('alice-second-9000'), { client_id: 'alice-terminal' });
    const pushed = await aliceSocket.waitFor((m) => m.type === 'logs');
    expect(pushed.data.size).toBeNull();
    expect(pushed.data.entries.map((e: { m: string }) => e.m).join('')).toContain('alice-second-9000');
    await aliceSocket.ended(second);
    const bobRun = await world.prompt(bob.key, fail('bob-second-1234'));
    await bobSocket.waitFor((m) => m.type === 'logs');
    expect(bobSocket.texts().filter((m) => m.type === 'logs').map((m) => JSON.stringify(m.data))).not.toEqual(expect.arrayContaining([expect.stringContaining('alice')]));
    expect(await world.waitStatus(bob.key, bobRun, ['error'])).toBe('error');
    expect(aliceSocket.texts().filter((m) => m.type === 'logs').some((m) => JSON.stringify(m.data).includes('bob'))).toBe(false);

    // Unsubscribed: no more pushes.
    expect((await patch(alice.key, '/internal/logs/subscribe', { clientId: 'alice-terminal', enabled: false })).status).toBe(200);
    const third = await world.prompt(alice.key, fail('alice-third'), { client_id: 'alice-terminal' });
    await aliceSocket.ended(third);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(aliceSocket.texts().filter((m) => m.type === 'logs')).toHaveLength(1);

    for (const body of ['{"enabled": true}', '{"clientId": "x"}', 'not json', '[]']) {
      const bad = await patch(alice.key, '/internal/logs/subscribe', body);
      expect([body, bad.status, typeof bad.body?.error?.message]).toEqual([body, 400, 'string']);
    }
    expect((await get(null, '/internal/logs')).status).toBe(401);
  });
});
