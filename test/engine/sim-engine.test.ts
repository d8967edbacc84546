/**
 * Behaviour beyond the recordings, driven through the engine-protocol client: the stock
 * text-to-image workflow, PNG determinism, step progress and previews, interrupt at a step
 * boundary, queue operations, large-file streaming, uploads, /view safety, logs, output kinds.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import jpeg from 'jpeg-js';
import {
  EngineClient,
  EngineSocket,
  EngineValidationError,
  type ApiPrompt,
  type BinaryFrame,
  type EngineMessage,
  type ExecutedMessage,
  type HistoryEntry,
} from '#libs/engine-protocol';
import { startSimEngine, type SimEngine } from '../../apps/sim-engine/src/server.js';
import { decodePng, encodePng } from '../../apps/sim-engine/src/png.js';

let engine: SimEngine;
let client: EngineClient;

beforeAll(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sim-engine-'));
  engine = await startSimEngine({
    port: 0,
    stepMs: 5,
    imageScale: 0.125,
    inputDir: path.join(dir, 'input'),
    outputDir: path.join(dir, 'output'),
    tempDir: path.join(dir, 'temp'),
    logToStderr: false,
  });
  client = new EngineClient(engine.url);
});

afterAll(async () => {
  await engine.close();
});

function txt2img(seed: number, steps = 4, text = 'a cat'): ApiPrompt {
  return {
    '3': { class_type: 'KSampler', inputs: { seed, steps, cfg: 8, sampler_name: 'euler', scheduler: 'normal', denoise: 1, model: ['4', 0], positive: ['6', 0], negative: ['7', 0], latent_image: ['5', 0] } },
    '4': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'v1-5-pruned-emaonly-fp16.safetensors' } },
    '5': { class_type: 'EmptyLatentImage', inputs: { width: 512, height: 512, batch_size: 1 } },
    '6': { class_type: 'CLIPTextEncode', inputs: { text, clip: ['4', 1] } },
    '7': { class_type: 'CLIPTextEncode', inputs: { text: 'text, watermark', clip: ['4', 1] } },
    '8': { class_type: 'VAEDecode', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '9': { class_type: 'SaveImage', inputs: { filename_prefix: 'ComfyUI', images: ['8', 0] } },
  };
}

interface Collected {
  messages: EngineMessage[];
  frames: BinaryFrame[];
  /** resolves once `executing` with node null arrived for this prompt */
  done(promptId: string): Promise<void>;
}

/** Collect a socket's traffic; the prompt may finish before submitPrompt even returns. */
function collect(socket: EngineSocket): Collected {
  const messages: EngineMessage[] = [];
  const frames: BinaryFrame[] = [];
  socket.on('binary', (f) => frames.push(f));
  socket.on('message', (m) => messages.push(m));
  const finished = (id: string): boolean =>
    messages.some((m) => m.type === 'executing' && (m.data as { node?: unknown }).node === null && (m.data as { prompt_id?: string }).prompt_id === id);
  return {
    messages,
    frames,
    async done(id) {
      for (let i = 0; i < 1000 && !finished(id); i++) await new Promise((r) => setTimeout(r, 10));
      if (!finished(id)) throw new Error(`prompt ${id} did not finish`);
    },
  };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function waitHistory(id: string): Promise<HistoryEntry> {
  for (let i = 0; i < 500; i++) {
    const h = await client.history(id);
    if (h) return h;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no history for ${id}`);
}

describe('sim-engine', () => {
  test('runs the stock text-to-image workflow with step progress, previews and a real PNG', async () => {
    const socket = new EngineSocket({ url: engine.url, featureFlags: { supports_preview_metadata: true } });
    const c = collect(socket);
    await socket.connect();
    const res = await client.submitPrompt({ prompt: txt2img(42), client_id: socket.clientId });
    const id = res.prompt_id;
    await c.done(id);
    await socket.close();

    expect(socket.serverFeatures).toEqual({ supports_preview_metadata: true, max_upload_size: expect.any(Number) });
    const progress = c.messages.filter((m) => m.type === 'progress').map((m) => (m.data as { value: number; max: number }).value);
    expect(progress).toEqual([1, 2, 3, 4]);
    expect(c.frames).toHaveLength(4);
    for (const f of c.frames) {
      expect(f.kind).toBe('preview_image_with_metadata');
      // JPEG, as the engine's sampler sends its previews (latent_preview.py).
      if (f.kind === 'preview_image_with_metadata') {
        expect(f.metadata).toMatchObject({ node_id: '3', prompt_id: id, image_type: 'image/jpeg' });
        expect(jpeg.decode(f.image)).toMatchObject({ width: 64, height: 64 });
      }
    }
    const order = c.messages.filter((m) => m.type === 'executing').map((m) => (m.data as { node: string | null }).node);
    // the engine's ExecutionList order for this graph
    expect(order).toEqual(['4', '5', '7', '6', '3', '8', '9', null]);
    const executed = c.messages.find((m): m is ExecutedMessage => m.type === 'executed')!;
    expect(executed.data.output).toEqual({ images: [{ filename: expect.stringMatching(/^ComfyUI_\d{5}_\.png$/), subfolder: '', type: 'output' }] });

    const history = await waitHistory(id);
    expect(history.status).toMatchObject({ status_str: 'success', completed: true });
    const file = (history.outputs['9']!.images as Array<{ filename: string; subfolder: string; type: string }>)[0]!;
    const png = await readAll(await client.view(file));
    const decoded = decodePng(png);
    expect([decoded.width, decoded.height]).toEqual([64, 64]);
    expect(decoded.text[0]![0]).toBe('prompt');
  });

  test('same seed and inputs give the same PNG bytes; another seed does not', async () => {
    const bytesFor = async (seed: number, prefix: string): Promise<string> => {
      const prompt = txt2img(seed, 2);
      prompt['9']!.inputs.filename_prefix = prefix;
      // a different prefix per run defeats the cache but not the image content, which is
      // hashed without the PNG text chunk (it holds the prompt and so the prefix)
      const { prompt_id } = await client.submitPrompt({ prompt });
      const h = await waitHistory(prompt_id);
      const ref = (h.outputs['9']!.images as Array<{ filename: string; subfolder: string; type: string }>)[0]!;
      const decoded = decodePng(await readAll(await client.view(ref)));
      return createHash('sha256').update(encodePng(decoded, { compressLevel: 4 })).digest('hex');
    };
    const a = await bytesFor(7, 'det_a');
    const b = await bytesFor(7, 'det_b');
    const c = await bytesFor(8, 'det_c');
    expect(a).toBe(b);
    expect(c).not.toBe(a);

    // identical prompts: byte-identical files, text chunk included
    const prompt = txt2img(9, 2);
    prompt['9']!.inputs.filename_prefix = 'det_same';
    const first = await client.submitPrompt({ prompt });
    await waitHistory(first.prompt_id);
    const f1 = await readAll(await client.view({ filename: 'det_same_00001_.png', subfolder: '', type: 'output' }));
    const again = structuredClone(prompt);
    again['3']!.inputs.denoise = 1.0; // same values: cached run, same file reported
    const second = await client.submitPrompt({ prompt: again });
    const h2 = await waitHistory(second.prompt_id);
    expect(h2.outputs['9']).toEqual({ images: [{ filename: 'det_same_00001_.png', subfolder: '', type: 'output' }] });
    const f2 = await readAll(await client.view({ filename: 'det_same_00001_.png', subfolder: '', type: 'output' }));
    expect(f2.equals(f1)).toBe(true);
  });

  test('interrupt lands at a sampler step boundary', async () => {
    const socket = new EngineSocket({ url: engine.url });
    const c = collect(socket);
    await socket.connect();
    const prompt = txt2img(1234, 200);
    const id = await startSlowRun(prompt, socket.clientId);
    // wait for a few steps, then interrupt that prompt
    while (c.messages.filter((m) => m.type === 'progress').length < 3) await new Promise((r) => setTimeout(r, 5));
    await client.interrupt(id);
    await c.done(id);
    await socket.close();
    const progress = c.messages.filter((m) => m.type === 'progress').map((m) => (m.data as { value: number }).value);
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress.length).toBeLessThan(200);
    expect(progress).toEqual(progress.map((_, i) => i + 1)); // whole steps only, no gap
    const interrupted = c.messages.find((m) => m.type === 'execution_interrupted');
    expect(interrupted?.data).toMatchObject({ prompt_id: id, node_id: '3', node_type: 'KSampler' });
    // legacy previews (no feature flags): type 1 frames with the JPEG format word, as the sampler's
    expect(c.frames.length).toBe(progress.length);
    expect(c.frames.every((f) => f.kind === 'preview_image' && f.imageFormat === 1 && f.mimeType === 'image/jpeg')).toBe(true);
    const h = await waitHistory(id);
    expect(h.status).toMatchObject({ status_str: 'error', completed: false });
    expect(h.status!.messages.map((m) => m[0])).toEqual(['execution_start', 'execution_cached', 'execution_interrupted']);
  });

  test('queue: FIFO, delete pending, interrupt only the named running prompt', async () => {
    const sleep = (ms: number, tag: string): ApiPrompt => ({ '1': { class_type: 'SimSleep', inputs: { ms, source: tag } } });
    const a = await client.submitPrompt({ prompt: sleep(400, 'a') });
    const b = await client.submitPrompt({ prompt: sleep(10, 'b') });
    const c = await client.submitPrompt({ prompt: sleep(10, 'c') });
    const q = await client.queue();
    expect(q.queue_running.map((x) => x[1])).toEqual([a.prompt_id]);
    expect(q.queue_pending.map((x) => x[1])).toEqual([b.prompt_id, c.prompt_id]);
    await client.deleteFromQueue([b.prompt_id]);
    expect((await client.queue()).queue_pending.map((x) => x[1])).toEqual([c.prompt_id]);
    await client.interrupt(c.prompt_id); // not running: ignored
    await client.interrupt(a.prompt_id);
    const ha = await waitHistory(a.prompt_id);
    expect(ha.status?.status_str).toBe('error');
    const hc = await waitHistory(c.prompt_id);
    expect(hc.status?.status_str).toBe('success');
    expect(await client.history(b.prompt_id)).toBeUndefined();
    expect((await client.queueInfo()).exec_info.queue_remaining).toBe(0);
    const all = await client.historyAll(1);
    expect(Object.keys(all)).toEqual([c.prompt_id]);
  });

  test('SimFail reports execution_error with the given exception', async () => {
    const socket = new EngineSocket({ url: engine.url });
    const c = collect(socket);
    await socket.connect();
    const id = (await client.submitPrompt({ prompt: { '1': { class_type: 'SimFail', inputs: { exception_type: 'ValueError', message: 'boom' } } }, client_id: socket.clientId })).prompt_id;
    await c.done(id);
    await socket.close();
    const err = c.messages.find((m) => m.type === 'execution_error');
    expect(err?.data).toMatchObject({ node_id: '1', node_type: 'SimFail', exception_type: 'ValueError', exception_message: 'boom\n', current_inputs: { exception_type: ['ValueError'], message: ['boom'] } });
  });

  test('SimLargeFile streams a big output to disk and /view streams it back in chunks', async () => {
    const size = 16 * 1024 * 1024 + 17;
    const run = async (prefix: string): Promise<{ hash: string; chunks: number; maxChunk: number; ref: unknown; length: number | null }> => {
      const { prompt_id } = await client.submitPrompt({ prompt: { '1': { class_type: 'SimLargeFile', inputs: { size_bytes: size, filename_prefix: prefix, seed: 3 } } } });
      const h = await waitHistory(prompt_id);
      expect(h.status?.status_str).toBe('success');
      const ref = (h.outputs['1']!.files as Array<{ filename: string; subfolder: string; type: string }>)[0]!;
      const view = await client.viewWithInfo(ref);
      const hash = createHash('sha256');
      let total = 0;
      let chunks = 0;
      let maxChunk = 0;
      for await (const chunk of view.stream) {
        const b = chunk as Buffer;
        total += b.length;
        chunks++;
        maxChunk = Math.max(maxChunk, b.length);
        hash.update(b);
      }
      expect(total).toBe(size);
      return { hash: hash.digest('hex'), chunks, maxChunk, ref, length: view.contentLength };
    };
    const a = await run('big');
    expect(a.ref).toEqual({ filename: 'big_00001_.bin', subfolder: '', type: 'output' });
    expect(a.length).toBe(size);
    // delivered as a stream of small pieces, never one buffer of the whole file
    expect(a.chunks).toBeGreaterThan(16);
    expect(a.maxChunk).toBeLessThanOrEqual(1024 * 1024);
    const b = await run('big_again');
    expect(b.hash).toBe(a.hash); // same seed, same bytes
  });

  test('uploads: multipart streamed, rename on clash, mask applies alpha; LoadImage lists it', async () => {
    const img = encodePng({ width: 4, height: 3, channels: 3, data: new Uint8Array(36).fill(200) });
    const up1 = await client.uploadImage(Readable.from([img.subarray(0, 10), img.subarray(10)]), 'pic.png', { overwrite: true });
    expect(up1).toEqual({ name: 'pic.png', subfolder: '', type: 'input' });
    const same = await client.uploadImage(img, 'pic.png');
    expect(same.name).toBe('pic.png'); // same bytes: reused
    const other = encodePng({ width: 4, height: 3, channels: 3, data: new Uint8Array(36).fill(10) });
    expect((await client.uploadImage(other, 'pic.png')).name).toBe('pic (1).png');
    const info = await client.objectInfo('LoadImage');
    expect(info.LoadImage!.input.required!.image![0]).toEqual(expect.arrayContaining(['pic.png', 'pic (1).png']));

    const mask = encodePng({ width: 4, height: 3, channels: 4, data: new Uint8Array(48).fill(77) });
    const m = await client.uploadImage(mask, 'pic_mask.png', { mask: { originalRef: { filename: 'pic.png', type: 'input' } }, overwrite: true });
    const masked = decodePng(await readAll(await client.view({ filename: m.name, type: 'input' })));
    expect(masked.channels).toBe(4);
    expect([masked.data[0], masked.data[3]]).toEqual([200, 77]);

    const { prompt_id } = await client.submitPrompt({
      prompt: {
        '1': { class_type: 'LoadImage', inputs: { image: 'pic.png' } },
        '2': { class_type: 'ImageScale', inputs: { image: ['1', 0], upscale_method: 'bilinear', width: 8, height: 0, crop: 'disabled' } },
        '3': { class_type: 'PreviewImage', inputs: { images: ['2', 0] } },
      },
    });
    const h = await waitHistory(prompt_id);
    const ref = (h.outputs['3']!.images as Array<{ filename: string; subfolder: string; type: string }>)[0]!;
    expect(ref.type).toBe('temp');
    const out = decodePng(await readAll(await client.view(ref)));
    expect([out.width, out.height]).toEqual([8, 6]);
  });

  test('/view refuses traversal; /api prefix works; unknown files 404', async () => {
    const get = async (p: string): Promise<number> => (await fetch(engine.url + p)).status;
    expect(await get('/view?filename=../secret.png&type=output')).toBe(400);
    expect(await get('/view?filename=%2Fetc%2Fpasswd&type=output')).toBe(400);
    expect(await get('/view?filename=a.png&type=output&subfolder=../../etc')).toBe(403);
    expect(await get('/view?filename=a.png&type=nope')).toBe(400);
    expect(await get('/api/view?filename=none.png&type=output')).toBe(404);
    expect(await get('/api/object_info/KSampler')).toBe(200);
    expect(await (await fetch(engine.url + '/api/features')).json()).toEqual({ supports_preview_metadata: true, max_upload_size: 104857600 });
  });

  test('validation failure throws EngineValidationError carrying the engine body', async () => {
    const bad = txt2img(1);
    bad['3']!.inputs.steps = 0;
    bad['3']!.inputs.cfg = 150;
    const err = await client.submitPrompt({ prompt: bad }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineValidationError);
    const body = (err as EngineValidationError).body;
    expect(body.error.type).toBe('prompt_outputs_failed_validation');
    expect(body.node_errors['3']!.errors.map((e) => [e.type, e.message])).toEqual([
      ['value_smaller_than_min', 'Value 0 smaller than min of 1'],
      ['value_bigger_than_max', 'Value 150.0 bigger than max of 100.0'],
    ]);
    const bad2 = txt2img(1);
    bad2['3']!.inputs.model = ['4', 0, 1];
    const err2 = (await client.submitPrompt({ prompt: bad2 }).catch((e: unknown) => e)) as EngineValidationError;
    expect(err2.body.node_errors['3']!.errors[0]!.type).toBe('bad_linked_input');
  });

  test('log subscription pushes logs messages; /internal/logs answers', async () => {
    const socket = new EngineSocket({ url: engine.url });
    await socket.connect();
    await client.subscribeLogs(socket.clientId, true);
    const got = new Promise<EngineMessage>((resolve) => socket.on('message', (m) => m.type === 'logs' && resolve(m)));
    await client.submitPrompt({ prompt: { '1': { class_type: 'SimSleep', inputs: { ms: 1 } } } });
    const msg = await got;
    expect(msg.data).toEqual({ entries: expect.arrayContaining([{ t: expect.any(String), m: 'got prompt\n' }]), size: { cols: expect.any(Number), rows: expect.any(Number) } });
    await socket.close();
    const raw = await client.logs();
    expect(raw.entries.some((e) => e.m === 'got prompt\n')).toBe(true);
    const text = (await (await fetch(engine.url + '/internal/logs')).json()) as string;
    expect(text).toContain(' - got prompt\n');
  });

  test('audio, animated (video-ish) and text outputs', async () => {
    const { prompt_id } = await client.submitPrompt({
      prompt: {
        '1': { class_type: 'SimAudioTone', inputs: { seconds: 0.2, frequency: 440, sample_rate: 8000 } },
        '2': { class_type: 'SaveAudio', inputs: { audio: ['1', 0], filename_prefix: 'audio/tone' } },
        '3': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 3, color: 255 } },
        '4': { class_type: 'SaveAnimatedPNG', inputs: { images: ['3', 0], filename_prefix: 'anim', fps: 6, compress_level: 4 } },
        '5': { class_type: 'PrimitiveString', inputs: { value: 'hi' } },
        '6': { class_type: 'PreviewAny', inputs: { source: ['5', 0] } },
      },
    });
    const h = await waitHistory(prompt_id);
    expect(h.outputs['2']).toEqual({ audio: [{ filename: 'tone_00001_.flac', subfolder: 'audio', type: 'output' }] });
    expect(h.outputs['4']).toEqual({ images: [{ filename: 'anim_00001_.png', subfolder: '', type: 'output' }], animated: [true] });
    expect(h.outputs['6']).toEqual({ text: ['hi'] });
    const flac = await readAll(await client.view({ filename: 'tone_00001_.flac', subfolder: 'audio', type: 'output' }));
    expect(flac.subarray(0, 4).toString('latin1')).toBe('fLaC');
    const apng = await readAll(await client.view({ filename: 'anim_00001_.png', type: 'output' }));
    expect(apng.includes(Buffer.from('acTL'))).toBe(true);
  });

  test('socket reconnects with backoff after the server drops it', async () => {
    const socket = new EngineSocket({ url: engine.url, initialDelayMs: 20 });
    await socket.connect();
    const reopened = new Promise<{ reconnect: boolean }>((resolve) => socket.on('open', resolve));
    // drop every connection server-side by restarting the hub's sockets
    (socket as unknown as { ws: { terminate(): void } }).ws.terminate();
    expect(await reopened).toEqual({ reconnect: true });
    expect(socket.sid).toBe(socket.clientId);
    await socket.close();
  });
});

async function startSlowRun(prompt: ApiPrompt, clientId: string): Promise<string> {
  return (await client.submitPrompt({ prompt, client_id: clientId })).prompt_id;
}

describe('sim-engine startup', () => {
  test('refuses connections until SIM_STARTUP_DELAY_MS has passed; ready() reports it', async () => {
    const net = await import('node:net');
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const starting = startSimEngine({ port, startupDelayMs: 300, logToStderr: false });
    const probe = new EngineClient(`http://127.0.0.1:${port}`);
    expect(await probe.ready(200)).toBe(false);
    await probe.waitUntilReady(5000, 50);
    expect(await probe.ready()).toBe(true);
    const late = await starting;
    expect(late.port).toBe(port);
    await late.close();
  });
});
