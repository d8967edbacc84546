import { mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { blake3Hex } from '#libs/storage';
import { startCloud, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit, uploadForm, type Reply } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { pngTextChunks, wavTone } from '../support/media.js';
import { TestStack } from '../support/stack.js';
import { V1Socket, testPng } from '../v1/v1-world.js';

// A tenant's input files are its own, on every surface: a file name in a workflow resolves only to
// the caller's uploads (v2 assets by their file_path, v1 uploads by the name the upload answered),
// and nothing the engine knows about other tenants' inputs (its input folder, the names and paths
// the worker staged them under, the cache scope it adds) ever reaches a tenant. Two accounts share
// one worker and one engine, whose input folder the worker cleans after each job.

type Account = { id: string; key: string };

const v2 = (cloud: Cloud, key: string, route: string, init: RequestInit = {}) =>
  call(`${cloud.api.url}${route}`, { ...init, headers: { ...bearer(key), ...(init.headers as Record<string, string>) } });

function loadInvertSave(image: string | object, extra: Record<string, any> = {}): Record<string, any> {
  return {
    '1': { class_type: 'LoadImage', inputs: { image } },
    '2': { class_type: 'ImageInvert', inputs: { image: ['1', 0] } },
    '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'inverted' } },
    ...extra,
  };
}

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

describe('input files: each tenant names only its own', () => {
  const stack = new TestStack('local');
  const engineInput = `/tmp/${stack.name}/engine-input`;
  let cloud: Cloud;
  let a: Account;
  let b: Account;
  const photo = testPng(16, 16, 3);

  const submit = (acct: Account, workflow: object, headers: Record<string, string> = {}) =>
    v2(cloud, acct.key, '/api/v2/jobs', jsonInit('POST', { workflow }, { prefer: 'wait=20', ...headers }));
  const upload = (acct: Account, bytes: Uint8Array, filePath: string, contentType = 'image/png') =>
    v2(cloud, acct.key, '/api/v2/assets', { method: 'POST', body: uploadForm(bytes, filePath, { file_path: filePath, content_type: contentType }) });
  const v1Prompt = (acct: Account, prompt: object) =>
    call(`${cloud.api.url}/api/prompt`, jsonInit('POST', { prompt }, { 'x-api-key': acct.key }));
  const waitForEnd = async (acct: Account, id: string) => {
    let job: Reply = await v2(cloud, acct.key, `/api/v2/jobs/${id}`);
    await waitUntil(async () => {
      job = await v2(cloud, acct.key, `/api/v2/jobs/${id}`);
      return ['succeeded', 'failed', 'canceled', 'expired'].includes(job.body.status);
    }, 30_000, `job ${id} to end`);
    return job.body;
  };

  beforeAll(async () => {
    await stack.open();
    mkdirSync(engineInput, { recursive: true });
    cloud = await startCloud(stack, { engine: { SIM_INPUT_DIR: engineInput }, worker: { ENGINE_INPUT_DIR: engineInput } });
    a = await stack.account({ name: 'a' });
    b = await stack.account({ name: 'b' });
    expect((await upload(a, photo, 'photo.png')).status).toBe(201);
    expect((await upload(b, testPng(8, 8, 9), 'mine.png')).status).toBe(201);
  }, 60_000);
  afterAll(() => stack.close());

  test('a plain file name resolves to the caller own upload on v2, as the official client sends it; the output carries the workflow as sent', async () => {
    const workflow = loadInvertSave('photo.png');
    const res = await submit(a, workflow);
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('succeeded');
    expect((await v2(cloud, a.key, `/api/v2/jobs/${res.body.id}/workflow`)).body).toEqual({ workflow, format: 'api' });

    const out = await fetch(res.body.outputs[0].url);
    expect(out.status).toBe(200);
    const bytes = Buffer.from(await out.arrayBuffer());
    // The engine embedded the prompt it ran (staged names, cache scope); the tenant's file has theirs.
    const text = Object.fromEntries(pngTextChunks(bytes));
    expect(JSON.parse(text.prompt!)).toEqual(workflow);
    expect(text.prompt).not.toMatch(/cloud_cache_scope|cloud-[0-9a-f]/);
    // Staged inputs are gone from the engine once the job is over.
    await waitUntil(() => filesUnder(engineInput).length === 0, 5_000, 'the staged input to be removed');
  });

  test('v1 uploads are named in v2 workflows and v2 file paths in v1 prompts, per account', async () => {
    const form = new FormData();
    form.append('image', new Blob([testPng(8, 8, 5)]), 'v1.png');
    const up = await call(`${cloud.api.url}/api/upload/image`, { method: 'POST', headers: { 'x-api-key': a.key }, body: form });
    expect(up.status).toBe(200);
    expect((await submit(a, loadInvertSave(up.body.name))).body.status).toBe('succeeded');
    const v1 = await v1Prompt(a, loadInvertSave('photo.png'));
    expect(v1.status).toBe(200);
    expect((await waitForEnd(a, v1.body.prompt_id)).status).toBe('succeeded');
    // Another account knows neither name.
    for (const name of [up.body.name, 'photo.png']) {
      const refused = await submit(b, loadInvertSave(name));
      expect(refused.status).toBe(422);
      expect(refused.body.error.code).toBe('invalid_workflow');
      expect((await v1Prompt(b, loadInvertSave(name))).status).toBe(400);
    }
  });

  test('another tenant can neither list nor name what the engine holds for a running job', async () => {
    // A's job stays running while B tries every name the engine could know A's input by.
    const slow = loadInvertSave('photo.png', { '4': { class_type: 'SimSleep', inputs: { ms: 4000, source: ['1', 0] } } });
    const running = await submit(a, slow, { prefer: 'wait=0' });
    expect(running.status).toBe(201);
    const stagedName = /^cloud-[0-9a-f]{24}\/[0-9a-f]{32}\.png$/;
    await waitUntil(() => filesUnder(engineInput).some((f) => stagedName.test(f)), 15_000, 'the input to be staged');
    const staged = filesUnder(engineInput).find((f) => stagedName.test(f));
    const photoAsset = (await v2(cloud, a.key, `/api/v2/jobs/${running.body.id}/workflow`)).body;
    expect(photoAsset.workflow['1'].inputs.image).toBe('photo.png');

    // The engine's own listing never shows staged files: they are in a subfolder.
    const engineInfo = await call(`${cloud.engines[0]!.url}/object_info/LoadImage`);
    expect(engineInfo.body.LoadImage.input.required.image[0]).toEqual([]);

    // Every name the engine or the store could know A's input by: the staged path, its file name,
    // annotated as the front end does, the name content addressing gives it, A's own name.
    const attempts = [staged!, path.basename(staged!), `${staged} [input]`, `${blake3Hex(photo)}.png`, 'photo.png'];
    for (const name of attempts) {
      const refused = await submit(b, loadInvertSave(name));
      expect(refused.status).toBe(422);
      expect(refused.body.error.code).toBe('invalid_workflow');
      // The refusal echoes what B sent and lists only B's own files.
      const listed = /not in (\[.*?\])/.exec(refused.body.error.details.node_errors['1'][0].reason)?.[1];
      expect(JSON.parse(listed!)).toEqual(['mine.png']);
      const v1 = await v1Prompt(b, loadInvertSave(name));
      expect(v1.status).toBe(400);
      expect(v1.body.node_errors['1'].errors[0].type).toBe('value_not_in_list');
      expect(JSON.stringify(v1.body.node_errors['1'].errors[0].extra_info.input_config)).not.toContain('photo.png');
      expect(JSON.stringify(v1.body.node_errors['1'].errors[0].extra_info.input_config)).not.toMatch(/cloud-/);
    }
    // B's definitions list B's files only.
    for (const route of ['/api/object_info', '/api/object_info/LoadImage']) {
      const info = await call(`${cloud.api.url}${route}`, { headers: { 'x-api-key': b.key } });
      expect(info.body.LoadImage.input.required.image[0]).toEqual(['mine.png']);
    }
    const mine = await call(`${cloud.api.url}/api/object_info/LoadImage`, { headers: { 'x-api-key': a.key } });
    expect(mine.body.LoadImage.input.required.image[0]).toContain('photo.png');

    expect((await waitForEnd(a, running.body.id)).status).toBe('succeeded');
    await waitUntil(() => filesUnder(engineInput).length === 0, 5_000, 'the staged input to be removed');
  });

  test('engine paths and the cache scope never reach the tenant: errors, tracebacks, current_inputs, logs', async () => {
    expect((await upload(a, Buffer.from('this is not an image at all'), 'broken.png')).status).toBe(201);
    const ws = new V1Socket(new WebSocket(`${cloud.api.url.replace('http', 'ws')}/ws?clientId=iso&token=${a.key}`));
    await ws.opened;
    try {
      const failed = await submit(a, loadInvertSave('broken.png'));
      expect(failed.body.status).toBe('failed');
      expect(failed.body.error.message).toContain("cannot identify image file 'broken.png'");
      expect(JSON.stringify(failed.body.error)).not.toMatch(/cloud-|engine-input|\/tmp\//);
      const log = await v2(cloud, a.key, `/api/v2/jobs/${failed.body.id}/logs`);
      expect(log.status).toBe(200);
      expect(log.body.text).toContain('broken.png');
      expect(log.body.text).not.toMatch(/cloud-|engine-input/);

      // A node that fails with the job's inputs in hand: the engine reports all of them.
      const v1 = await v1Prompt(a, {
        ...loadInvertSave('photo.png'),
        '5': { class_type: 'SimFail', inputs: { exception_type: 'RuntimeError', message: 'boom', source: ['1', 0] } },
      });
      const error = await ws.waitFor((m) => m.type === 'execution_error' && m.data?.prompt_id === v1.body.prompt_id);
      expect(Object.keys(error.data.current_inputs).sort()).toEqual(['exception_type', 'message', 'source']);
      expect(JSON.stringify(error.data)).not.toMatch(/cloud_cache_scope|cloud-|engine-input/);
      await waitForEnd(a, v1.body.prompt_id);
      const history = await call(`${cloud.api.url}/api/history/${v1.body.prompt_id}`, { headers: { 'x-api-key': a.key } });
      expect(JSON.stringify(history.body)).not.toMatch(/cloud_cache_scope|cloud-[0-9a-f]/);
      const queueItem = history.body[v1.body.prompt_id].prompt[2];
      expect(queueItem['1'].inputs.image).toBe('photo.png');
    } finally {
      ws.close();
    }
  });

  test('audio and mask inputs are scoped the same way (LoadAudio, LoadImageMask)', async () => {
    expect((await upload(a, wavTone(0.2), 'voice.wav', 'audio/wav')).status).toBe(201);
    const audio = { '1': { class_type: 'LoadAudio', inputs: { audio: 'voice.wav' } }, '2': { class_type: 'SaveAudio', inputs: { audio: ['1', 0], filename_prefix: 'a' } } };
    expect((await submit(a, audio)).body.status).toBe('succeeded');
    const refusedAudio = await submit(b, audio);
    expect(refusedAudio.status).toBe(422);
    const info = await call(`${cloud.api.url}/api/object_info/LoadAudio`, { headers: { 'x-api-key': b.key } });
    expect(info.body.LoadAudio.input.required.audio[0]).toEqual([]);
    const mineA = await call(`${cloud.api.url}/api/object_info/LoadAudio`, { headers: { 'x-api-key': a.key } });
    expect(mineA.body.LoadAudio.input.required.audio[0]).toEqual(['voice.wav']);

    const mask = (image: string) => ({
      '1': { class_type: 'LoadImageMask', inputs: { image, channel: 'red' } },
      '2': { class_type: 'SimSleep', inputs: { ms: 0, source: ['1', 0] } },
    });
    expect((await submit(a, mask('photo.png'))).body.status).toBe('succeeded');
    expect((await submit(b, mask('photo.png'))).status).toBe(422);
  });
});
