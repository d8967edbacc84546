import jpeg from 'jpeg-js';
import { decodeBinaryFrame } from '#libs/engine-protocol';
import { blake3Hex } from '#libs/storage';
import { call } from '../support/http.js';
import { decodePng } from '../../apps/api/src/v1/images/png.js';
import { V1World, sleeper, testPng, textToImage, type V1Socket } from './v1-world.js';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('v1: upload, prompt, WebSocket, history, view', () => {
  const world = new V1World();
  let a: { id: string; key: string };
  let b: { id: string; key: string };
  let legacy: V1Socket;
  let withMetadata: V1Socket;
  let other: V1Socket;
  let uploaded: string;
  let promptId: string;

  beforeAll(async () => {
    await world.start();
    a = await world.account();
    b = await world.account();
    legacy = await world.socket(a.key, { clientId: 'client-a1' });
    withMetadata = await world.socket(a.key, { clientId: 'client-a2', path: '/api/ws', via: 'header', metadata: true });
    other = await world.socket(b.key, { clientId: 'client-b' });
  });
  afterAll(() => world.close());

  it('stores uploads by content: the same bytes get the same name, subfolder and overwrite are ignored', async () => {
    const png = testPng(8, 6);
    const first = await world.upload(a.key, png, 'photo.PNG', { type: 'input', subfolder: 'some/where', overwrite: 'true' });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ name: `${blake3Hex(png)}.png`, subfolder: '', type: 'input' });
    const again = await world.upload(a.key, png, 'other-name.png', { overwrite: 'false' });
    expect(again.body.name).toBe(first.body.name);
    uploaded = first.body.name;
    // The account's own uploads are its input folder in the node definitions; B's list stays empty.
    const mine = await world.get(a.key, '/api/object_info/LoadImage');
    expect(mine.body.LoadImage.input.required.image[0]).toEqual([uploaded]);
    const theirs = await world.get(b.key, '/api/object_info');
    expect(theirs.body.LoadImage.input.required.image[0]).toEqual([]);
    expect(theirs.body.KSampler.input.required.steps[0]).toBe('INT');
  });

  it('records an upload\'s own type only when it is a media type, else the one its name implies', async () => {
    const png = testPng(5, 5, 9);
    const form = new FormData();
    form.append('image', new Blob([png], { type: 'garbage' }), 'odd.png');
    const reply = await fetch(`${world.url}/api/upload/image`, { method: 'POST', headers: { 'x-api-key': a.key }, body: form });
    expect(reply.status).toBe(200);
    const { name } = (await reply.json()) as { name: string };
    const asset = await world.stack.db.asset.findFirstOrThrow({ where: { filePath: name } });
    expect(asset.contentType).toBe('image/png');
  });

  it('runs a prompt and streams the engine messages in the engine order through execution_success', async () => {
    const prompt = {
      ...textToImage(3),
      '20': { class_type: 'LoadImage', inputs: { image: uploaded } },
      '21': { class_type: 'ImageScale', inputs: { image: ['20', 0], upscale_method: 'nearest-exact', width: 16, height: 12, crop: 'disabled' } },
      '22': { class_type: 'SaveImage', inputs: { images: ['21', 0], filename_prefix: 'scaled' } },
    };
    const reply = await world.post(a.key, '/api/prompt', { prompt, client_id: 'client-a1', number: 5, front: true });
    expect(reply.status).toBe(200);
    expect(Object.keys(reply.body).sort()).toEqual(['node_errors', 'number', 'prompt_id']);
    expect(reply.body.node_errors).toEqual({});
    expect(typeof reply.body.number).toBe('number');
    promptId = reply.body.prompt_id;
    await legacy.ended(promptId);
    await withMetadata.ended(promptId);

    // Every socket of the account got every message, in the same order.
    const seq = (s: V1Socket) => s.texts().filter((m) => m.type !== 'feature_flags').map((m) => `${m.type}:${m.data?.node ?? ''}`);
    expect(seq(withMetadata)).toEqual(seq(legacy));

    const texts = legacy.texts();
    expect(texts[0]).toEqual({ kind: 'text', type: 'status', data: { status: { exec_info: { queue_remaining: 0 } }, sid: 'client-a1' } });
    const at = (type: string, node?: string) => texts.findIndex((m) => m.type === type && (node === undefined || m.data?.node === node));
    const start = at('execution_start');
    // Queue status (the prompt waiting) before it starts, as the engine does.
    expect(texts.slice(1, start).some((m) => m.type === 'status' && m.data.status.exec_info.queue_remaining >= 1)).toBe(true);
    expect(at('execution_cached')).toBe(start + 1);
    expect(texts[start]!.data).toEqual({ prompt_id: promptId, timestamp: expect.any(Number) });
    for (const node of ['3', '9', '20', '22']) expect(at('executing', node)).toBeGreaterThan(start);
    expect(at('executing', '9')).toBeLessThan(at('executed', '9'));
    expect(at('executing', '22')).toBeLessThan(at('executed', '22'));
    const progress = texts.filter((m) => m.type === 'progress');
    expect(progress.map((m) => m.data)).toEqual([1, 2, 3].map((v) => ({ value: v, max: 3, prompt_id: promptId, node: '3' })));
    // The engine repeats the prompt id in each node of progress_state: the client's id there too.
    const states = texts.filter((m) => m.type === 'progress_state');
    expect(states.length).toBeGreaterThan(0);
    for (const m of states) for (const node of Object.values(m.data.nodes) as Array<{ prompt_id: string }>) expect(node.prompt_id).toBe(promptId);
    const success = at('execution_success');
    expect(success).toBeGreaterThan(at('executed', '9'));
    expect(success).toBeGreaterThan(at('executed', '22'));
    // Then the queue count and, last, `executing` with no node.
    expect(texts[success + 1]).toMatchObject({ type: 'status', data: { status: { exec_info: { queue_remaining: 0 } } } });
    expect(texts[success + 2]).toEqual({ kind: 'text', type: 'executing', data: { node: null, prompt_id: promptId } });
    for (const m of texts.slice(start)) if (m.type !== 'status') expect(m.data.prompt_id).toBe(promptId);

    const executed = texts[at('executed', '9')]!.data;
    expect(executed).toEqual({ node: '9', display_node: '9', output: { images: [{ filename: expect.stringMatching(/^v1test_\d+_\.png$/), subfolder: promptId, type: 'output' }] }, prompt_id: promptId });
  });

  it('sends previews as type-1 frames, or type-4 frames to sockets that declared supports_preview_metadata', async () => {
    expect(withMetadata.texts().find((m) => m.type === 'feature_flags')!.data).toEqual({ supports_preview_metadata: true, max_upload_size: expect.any(Number) });
    const legacyFrames = legacy.binaries();
    expect(legacyFrames).toHaveLength(3);
    // The sampler's previews are JPEG, as the engine's sampler sends them.
    for (const f of legacyFrames) {
      expect(f.readUInt32BE(0)).toBe(1);
      expect(f.readUInt32BE(4)).toBe(1); // JPEG
      expect(jpeg.decode(f.subarray(8)).width).toBeGreaterThan(0);
    }
    const frames = withMetadata.binaries();
    expect(frames).toHaveLength(3);
    for (const [i, f] of frames.entries()) {
      expect(f.readUInt32BE(0)).toBe(4);
      const length = f.readUInt32BE(4);
      const metadata = f.subarray(8, 8 + length).toString('utf8');
      expect(JSON.parse(metadata)).toEqual({ node_id: '3', prompt_id: promptId, display_node_id: '3', parent_node_id: null, real_node_id: '3', image_type: 'image/jpeg' });
      // The engine's own formatting: Python's json.dumps separators.
      expect(metadata.startsWith('{"node_id": "3", "prompt_id": ')).toBe(true);
      const image = f.subarray(8 + length);
      expect(image.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff]))).toBe(true);
      // The same image bytes as the legacy frame of the same step.
      expect(image.equals(legacyFrames[i]!.subarray(8))).toBe(true);
    }
    // Each preview frame arrives before its step's progress message.
    const order = withMetadata.messages.filter((m) => m.kind === 'binary' || m.type === 'progress').map((m) => (m.kind === 'binary' ? 'frame' : 'progress'));
    expect(order).toEqual(['frame', 'progress', 'frame', 'progress', 'frame', 'progress']);
  });

  it("relays a node's progress text as a TEXT frame (type 3), to every socket of the account only", async () => {
    const id = await world.prompt(a.key, sleeper(7), { client_id: 'client-a1' });
    await legacy.ended(id);
    await withMetadata.ended(id);
    const textFrames = (socket: V1Socket) => socket.binaries().filter((f) => f.readUInt32BE(0) === 3).map((f) => decodeBinaryFrame(f));
    for (const socket of [legacy, withMetadata]) expect(textFrames(socket)).toEqual([{ kind: 'text', eventType: 3, nodeId: '1', text: 'slept 7 ms' }]);
    expect(textFrames(other)).toEqual([]);
  });

  it('answers history in the engine shape, with outputs that /api/view finds', async () => {
    const reply = await world.get(a.key, `/api/history/${promptId}`);
    expect(Object.keys(reply.body)).toEqual([promptId]);
    const entry = reply.body[promptId];
    expect(entry.prompt[1]).toBe(promptId);
    expect(entry.prompt[2]['20'].inputs.image).toBe(uploaded);
    expect(entry.prompt[3]).toEqual({ client_id: 'client-a1' });
    expect(entry.prompt[4].sort()).toEqual(['22', '9']);
    expect(entry.status).toMatchObject({ status_str: 'success', completed: true });
    expect(entry.status.messages.map((m: [string]) => m[0])).toEqual(['execution_start', 'execution_cached', 'execution_success']);
    expect(entry.meta['9']).toEqual({ node_id: '9', display_node: '9', parent_node: null, real_node_id: '9' });
    const image = entry.outputs['9'].images[0];
    expect(image).toEqual({ filename: expect.stringMatching(/\.png$/), subfolder: promptId, type: 'output' });
    expect(entry.outputs['22'].images[0].subfolder).toBe(promptId);

    const list = await world.get(a.key, '/api/history?max_items=5');
    expect(Object.keys(list.body)).toContain(promptId);
    expect((await world.get(a.key, `/api/job/${promptId}/status`)).body).toEqual({ status: 'success' });
    // A v1 prompt is a job like any other: v2 sees it.
    const v2 = await call(`${world.url}/api/v2/jobs/${promptId}`, { headers: { authorization: `Bearer ${a.key}` } });
    expect(v2.body).toMatchObject({ id: promptId, status: 'succeeded' });

    // /api/view: a redirect with no credential in it; the signed URL needs none.
    const view = await world.get(a.key, `/api/view?filename=${encodeURIComponent(image.filename)}&subfolder=${image.subfolder}&type=output`);
    expect(view.status).toBe(302);
    const location = view.headers.get('location')!;
    expect(location).not.toContain(a.key);
    for (const [name, value] of view.headers) expect(`${name}: ${value}`).not.toContain(a.key);
    const download = await fetch(location);
    expect(download.status).toBe(200);
    const bytes = Buffer.from(await download.arrayBuffer());
    expect(bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    const row = await world.stack.db.jobOutput.findFirstOrThrow({ where: { jobId: promptId, nodeId: '9' }, include: { asset: true } });
    expect(blake3Hex(bytes)).toBe(row.asset.blobHash);
    // The scaled upload really went through the engine: 16x12.
    const scaled = entry.outputs['22'].images[0];
    const scaledView = await world.get(a.key, `/api/view?filename=${scaled.filename}&subfolder=${scaled.subfolder}&type=output`);
    const scaledPng = decodePng(Buffer.from(await (await fetch(scaledView.headers.get('location')!)).arrayBuffer()));
    expect([scaledPng.width, scaledPng.height]).toEqual([16, 12]);
    // Inputs are viewable too.
    const input = await world.get(a.key, `/api/view?filename=${uploaded}&type=input&subfolder=`);
    expect(input.status).toBe(302);
    expect(Buffer.from(await (await fetch(input.headers.get('location')!)).arrayBuffer()).equals(testPng(8, 6))).toBe(true);
  });

  it('keeps what SaveImageWebsocket sends only over the socket: history lists the images, /api/view serves the bytes sent', async () => {
    const before = legacy.messages.length;
    const id = await world.prompt(a.key, {
      '1': { class_type: 'EmptyImage', inputs: { width: 16, height: 8, batch_size: 2, color: 0x2060a0 } },
      '2': { class_type: 'ImageInvert', inputs: { image: ['1', 0] } },
      '3': { class_type: 'SaveImageWebsocket', inputs: { images: ['2', 0] } },
    }, { client_id: 'client-a1' });
    await legacy.ended(id);
    // As the engine sends them: one PNG frame per image, and no `executed` for the node.
    const frames = legacy.messages.slice(before).filter((m) => m.kind === 'binary').map((m) => m.bytes!);
    expect(frames).toHaveLength(2);
    for (const f of frames) expect([f.readUInt32BE(0), f.readUInt32BE(4), f.subarray(8, 16).equals(PNG_SIGNATURE)]).toEqual([1, 2, true]);
    expect(legacy.texts(id).filter((m) => m.type === 'executed')).toEqual([]);
    // History lists them as SaveImage's are listed, so clients that read history find them too.
    const entry = (await world.get(a.key, `/api/history/${id}`)).body[id];
    expect(entry.outputs).toEqual({ '3': { images: [0, 1].map((i) => ({ filename: `3_images_${i}.png`, subfolder: id, type: 'output' })) } });
    expect(entry.status).toMatchObject({ status_str: 'success', completed: true });
    for (const [i, image] of (entry.outputs['3'].images as Array<{ filename: string }>).entries()) {
      const view = await world.get(a.key, `/api/view?filename=${image.filename}&subfolder=${id}&type=output`);
      expect(view.status).toBe(302);
      const bytes = Buffer.from(await (await fetch(view.headers.get('location')!)).arrayBuffer());
      expect(bytes.equals(frames[i]!.subarray(8))).toBe(true);
      expect(decodePng(bytes)).toMatchObject({ width: 16, height: 8 });
    }
  });

  it('has a prompt in the history by the time its socket gets the closing executing {node: null}', async () => {
    // Clients (the engine's own websocket example among them) read the history at that message,
    // which the engine sends after writing it. Here the job's row is held locked, so the worker
    // cannot store the job's end: the closing must wait for it.
    const id = await world.prompt(a.key, sleeper(300), { client_id: 'client-a1' });
    const closing = (m: { type?: string; data?: any }) => m.type === 'executing' && m.data?.node === null && m.data?.prompt_id === id;
    await legacy.waitFor((m) => m.type === 'execution_start' && m.data?.prompt_id === id);
    await world.stack.db.$transaction(
      async (tx) => {
        await tx.$queryRaw`SELECT id FROM jobs WHERE id = ${id}::uuid FOR UPDATE`;
        await legacy.waitFor((m) => m.type === 'execution_success' && m.data?.prompt_id === id);
        await new Promise((r) => setTimeout(r, 500));
        expect(legacy.texts(id).some(closing)).toBe(false);
      },
      { timeout: 30_000 },
    );
    await legacy.ended(id);
    const history = await world.get(a.key, `/api/history/${id}`);
    expect(history.body[id]?.status?.status_str).toBe('success');
  });

  it('keeps accounts apart: messages, files, history and queue entries', async () => {
    // B's socket saw its greeting and nothing of A's run.
    expect(other.messages.every((m) => m.kind === 'text' && m.type === 'status')).toBe(true);
    expect(other.messages.some((m) => JSON.stringify(m.data).includes(promptId))).toBe(false);
    const image = (await world.get(a.key, `/api/history/${promptId}`)).body[promptId].outputs['9'].images[0];
    expect((await world.get(b.key, `/api/view?filename=${image.filename}&subfolder=${promptId}&type=output`)).status).toBe(404);
    expect((await world.get(b.key, `/api/view?filename=${uploaded}&type=input`)).status).toBe(404);
    expect((await world.get(b.key, `/api/history/${promptId}`)).body).toEqual({});
    expect(Object.keys((await world.get(b.key, '/api/history')).body)).toEqual([]);
    expect((await world.get(b.key, `/api/job/${promptId}/status`)).status).toBe(404);
    // A's uploaded name means nothing to B: the engine's "not in list".
    const refused = await world.post(b.key, '/api/prompt', {
      prompt: { '1': { class_type: 'LoadImage', inputs: { image: uploaded } }, '2': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } } },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error.type).toBe('prompt_outputs_failed_validation');
    expect(refused.body.node_errors['1'].errors[0]).toMatchObject({ type: 'value_not_in_list' });
    // Nor can B build a mask on A's image.
    const mask = await world.upload(b.key, testPng(8, 6, 2, true), 'mask.png', { original_ref: JSON.stringify({ filename: uploaded, subfolder: '', type: 'input' }) }, '/api/upload/mask');
    expect(mask.status).toBe(404);

    // A's waiting and running jobs are invisible to B and out of its reach.
    const running = await world.prompt(a.key, sleeper(3000));
    const waiting = await world.prompt(a.key, sleeper(100));
    await world.waitStatus(a.key, running, ['executing']);
    expect(await world.get(b.key, '/api/queue')).toMatchObject({ body: { queue_running: [], queue_pending: [] } });
    expect((await world.post(b.key, '/api/queue', { delete: [running, waiting] })).status).toBe(200);
    expect((await world.post(b.key, '/api/queue', { clear: true })).status).toBe(200);
    expect((await world.post(b.key, '/api/interrupt', {})).status).toBe(200);
    expect((await world.post(b.key, '/api/interrupt', { prompt_id: running })).status).toBe(200);
    const queue = (await world.get(a.key, '/api/queue')).body;
    expect(queue.queue_running.map((t: unknown[]) => t[1])).toEqual([running]);
    expect(queue.queue_pending.map((t: unknown[]) => t[1])).toEqual([waiting]);
    await world.post(a.key, '/api/queue', { delete: [running, waiting] });
    await legacy.ended(running);
    expect(other.messages.some((m) => JSON.stringify(m.data ?? {}).includes(running))).toBe(false);
  });

  it('applies a mask\'s alpha to the original as the engine does', async () => {
    const original = testPng(8, 6);
    const mask = testPng(8, 6, 9, true);
    const reply = await world.upload(a.key, mask, 'mask.png', { type: 'input', subfolder: 'clipspace', original_ref: JSON.stringify({ filename: uploaded, subfolder: '', type: 'input' }) }, '/api/upload/mask');
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ name: expect.stringMatching(/^[0-9a-f]{64}\.png$/), subfolder: '', type: 'input' });
    const view = await world.get(a.key, `/api/view?filename=${reply.body.name}&type=input`);
    const result = decodePng(Buffer.from(await (await fetch(view.headers.get('location')!)).arrayBuffer()));
    const o = decodePng(original).rgba;
    const m = decodePng(mask).rgba;
    expect([result.width, result.height]).toEqual([8, 6]);
    for (let i = 0; i < 8 * 6; i++) {
      expect([...result.rgba.subarray(i * 4, i * 4 + 3)]).toEqual([...o.subarray(i * 4, i * 4 + 3)]);
      expect(result.rgba[i * 4 + 3]).toBe(m[i * 4 + 3]);
    }
    // The result is an input like any upload: usable in a later prompt.
    const id = await world.prompt(a.key, { '1': { class_type: 'LoadImage', inputs: { image: reply.body.name } }, '2': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } } });
    expect(await world.waitStatus(a.key, id, ['success', 'error'])).toBe('success');
    const wrongSize = await world.upload(a.key, testPng(4, 4, 3, true), 'mask.png', { original_ref: JSON.stringify({ filename: uploaded, type: 'input' }) }, '/api/upload/mask');
    expect(wrongSize.status).toBe(400);
  });

  it('answers the read-only routes clients call when they connect', async () => {
    expect((await world.get(a.key, '/api/prompt')).body).toEqual({ exec_info: { queue_remaining: 0 } });
    expect((await world.get(a.key, '/api/features')).body).toEqual({ supports_preview_metadata: true, max_upload_size: expect.any(Number) });
    const stats = (await world.get(a.key, '/api/system_stats')).body;
    expect(typeof stats.system.os).toBe('string');
    expect(Array.isArray(stats.devices)).toBe(true);
    expect((await world.get(a.key, '/api/object_info/NoSuchNode')).body).toEqual({});
    expect((await world.get(a.key, '/api/object_info/KSampler')).body.KSampler.input.required.sampler_name[0]).toContain('euler');
  });

  it("lists the engines' model folders, models and embeddings as the engine does", async () => {
    const engine = async (path: string) => (await call(world.engine.url + path)).body;
    const folders = await engine('/models');
    expect(folders).toContain('checkpoints');
    expect((await world.get(a.key, '/api/models')).body).toEqual(folders);
    const checkpoints = await engine('/models/checkpoints');
    expect(checkpoints.length).toBeGreaterThan(0);
    expect((await world.get(a.key, '/api/models/checkpoints')).body).toEqual(checkpoints);
    expect((await world.get(b.key, '/api/models/loras')).body).toEqual(await engine('/models/loras'));
    expect((await world.get(a.key, '/api/embeddings')).body).toEqual(await engine('/embeddings'));
    // The service serves no front end, so there are no extension scripts to load.
    expect((await world.get(a.key, '/api/extensions')).body).toEqual([]);
    const unknown = await world.get(a.key, '/api/models/no-such-folder');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    expect((await call(world.api.url + '/api/models')).status).toBe(401);
  });

  it('runs the outputs that validate and answers the others\' errors with the 200, as the engine does', async () => {
    const prompt = {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0 } },
      '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'partial' } },
      '3': { class_type: 'ImageInvert', inputs: {} },
      '4': { class_type: 'PreviewImage', inputs: { images: ['3', 0] } },
    };
    const reply = await world.post(a.key, '/api/prompt', { prompt });
    expect(reply.status).toBe(200);
    expect(reply.body.node_errors).toEqual({
      '3': { errors: [expect.objectContaining({ type: 'required_input_missing', details: 'image' })], dependent_outputs: ['4'], class_type: 'ImageInvert' },
    });
    const id = reply.body.prompt_id as string;
    expect(await world.waitStatus(a.key, id, ['success'])).toBe('success');
    const history = (await world.get(a.key, `/api/history/${id}`)).body[id];
    expect(Object.keys(history.outputs)).toEqual(['2']);
    expect(history.prompt[4]).toEqual(['2']);
    // The prompt kept is the one sent, with the nodes that failed validation, as the engine keeps it.
    expect(history.prompt[2]).toEqual(prompt);
    // Only the outputs that validated ran: the engine got the rest of the prompt without them.
    const job = await world.stack.db.job.findUniqueOrThrow({ where: { id } });
    expect(Object.keys(job.workflow as object).sort()).toEqual(['1', '2']);
    // With no output left to run, the prompt is refused as before.
    const none = await world.post(a.key, '/api/prompt', { prompt: { '3': prompt['3'], '4': prompt['4'] } });
    expect([none.status, none.body.error.type]).toEqual([400, 'prompt_outputs_failed_validation']);
  });

  it('takes a cached output from an earlier job of the same account only, or from the engine\'s own model files', async () => {
    const prompt = textToImage(2, 48);
    const cached = async (who: { key: string }, socket: V1Socket, clientId: string) => {
      const id = await world.prompt(who.key, prompt, { client_id: clientId });
      await socket.ended(id);
      expect(await world.waitStatus(who.key, id, ['success'])).toBe('success');
      return (socket.texts(id).find((m) => m.type === 'execution_cached')!.data.nodes as string[]).sort();
    };
    await cached(a, legacy, 'client-a1');
    // The same account again: everything comes from the cache.
    expect(await cached(a, legacy, 'client-a1')).toEqual(Object.keys(prompt).sort());
    // The history keeps exactly what the socket was sent: the cached nodes, the engine's timestamps.
    const rerun = legacy.texts().filter((m) => m.type === 'execution_cached').at(-1)!.data.prompt_id as string;
    const sent = legacy.texts(rerun).filter((m) => ['execution_start', 'execution_cached', 'execution_success'].includes(m.type!));
    const kept = (await world.get(a.key, `/api/history/${rerun}`)).body[rerun].status.messages;
    expect(kept).toEqual(sent.map((m) => [m.type, m.data]));
    expect(kept[1][1].nodes.sort()).toEqual(Object.keys(prompt).sort());
    // Another account, the same prompt: only the checkpoint, a file the engine lists for everyone.
    // Anything more would tell it what the job before its own asked for.
    expect(await cached(b, other, 'client-b')).toEqual(['4']);
    expect(prompt['4'].class_type).toBe('CheckpointLoaderSimple');
  });
});
