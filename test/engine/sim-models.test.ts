/**
 * The sim-engine's model folders (SIM_MODELS_DIR): lists as the engine makes them, loaders that
 * open the named files and check them, embeddings named in prompt text.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EngineClient, EngineValidationError, type ApiPrompt, type HistoryEntry } from '#libs/engine-protocol';
import { startSimEngine, type SimEngine } from '../../apps/sim-engine/src/server.js';
import { safetensors } from '../support/safetensors.js';

let engine: SimEngine;
let client: EngineClient;
let models: string;

beforeAll(async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sim-models-'));
  models = path.join(dir, 'models');
  const put = (rel: string, bytes: Buffer | string) => {
    mkdirSync(path.dirname(path.join(models, rel)), { recursive: true });
    writeFileSync(path.join(models, rel), bytes);
  };
  put('checkpoints/real.safetensors', safetensors());
  put('loras/styles/ink.safetensors', safetensors());
  put('loras/other.safetensors', safetensors());
  put('loras/readme.txt', 'not a model');
  put('loras/broken.safetensors', Buffer.concat([Buffer.from([255, 255, 255, 255, 0, 0, 0, 0]), Buffer.from('{}')]));
  put('vae/v.safetensors', safetensors());
  put('clip/c.safetensors', safetensors());
  put('unet/u.safetensors', safetensors());
  put('embeddings/sub/ink-embed.safetensors', safetensors(64));
  // A file linked in from elsewhere (how a worker's cache gives the engine a tenant's file).
  const outside = path.join(dir, 'cache-file');
  writeFileSync(outside, safetensors());
  mkdirSync(path.join(models, 'loras', 'linked'), { recursive: true });
  symlinkSync(outside, path.join(models, 'loras', 'linked', 'l.safetensors'));
  engine = await startSimEngine({
    port: 0,
    stepMs: 1,
    imageScale: 0.125,
    inputDir: path.join(dir, 'input'),
    outputDir: path.join(dir, 'output'),
    tempDir: path.join(dir, 'temp'),
    modelsDir: models,
    logToStderr: false,
  });
  client = new EngineClient(engine.url);
});

afterAll(async () => {
  await engine.close();
});

async function waitHistory(id: string): Promise<HistoryEntry> {
  for (let i = 0; i < 1000; i++) {
    const h = await client.history(id);
    if (h) return h;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no history for ${id}`);
}

function workflow(opts: { ckpt?: string; lora?: string; text?: string } = {}): ApiPrompt {
  const wf: ApiPrompt = {
    '4': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: opts.ckpt ?? 'real.safetensors' } },
    '5': { class_type: 'EmptyLatentImage', inputs: { width: 64, height: 64, batch_size: 1 } },
    '6': { class_type: 'CLIPTextEncode', inputs: { text: opts.text ?? 'a cat', clip: ['4', 1] } },
    '7': { class_type: 'CLIPTextEncode', inputs: { text: 'blurry', clip: ['4', 1] } },
    '3': { class_type: 'KSampler', inputs: { seed: 1, steps: 1, cfg: 8, sampler_name: 'euler', scheduler: 'normal', denoise: 1, model: ['4', 0], positive: ['6', 0], negative: ['7', 0], latent_image: ['5', 0] } },
    '8': { class_type: 'VAEDecode', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '9': { class_type: 'SaveImage', inputs: { filename_prefix: `m${Math.random()}`, images: ['8', 0] } },
  };
  if (opts.lora) {
    wf['10'] = { class_type: 'LoraLoader', inputs: { model: ['4', 0], clip: ['4', 1], lora_name: opts.lora, strength_model: 1, strength_clip: 1 } };
    wf['3']!.inputs.model = ['10', 0];
    wf['6']!.inputs.clip = ['10', 1];
  }
  return wf;
}

async function imageOf(prompt: ApiPrompt): Promise<{ entry: HistoryEntry; bytes: Buffer }> {
  const { prompt_id } = await client.submitPrompt({ prompt, client_id: 'models-test' });
  const entry = await waitHistory(prompt_id);
  const file = (entry.outputs['9']?.images as Array<{ filename: string; subfolder: string; type: string }> | undefined)?.[0];
  const chunks: Buffer[] = [];
  if (file) for await (const c of await client.view(file)) chunks.push(c as Buffer);
  return { entry, bytes: Buffer.concat(chunks) };
}

describe('sim-engine model folders', () => {
  test('lists each folder as the engine does: recursive, by extension, sorted, links followed', async () => {
    expect(await client.models('loras')).toEqual(['broken.safetensors', 'linked/l.safetensors', 'other.safetensors', 'styles/ink.safetensors']);
    expect(await client.models('text_encoders')).toEqual(['c.safetensors']);
    expect(await client.models('diffusion_models')).toEqual(['u.safetensors']);
    expect(await client.models('checkpoints')).toEqual(['real.safetensors', 'sim-checkpoint.safetensors', 'v1-5-pruned-emaonly-fp16.safetensors', 'v1-5-pruned-emaonly.safetensors']);
    expect(await client.embeddings()).toEqual(['sub/ink-embed']);
    const info = await client.objectInfo();
    expect((info.LoraLoader!.input!.required!.lora_name as unknown[])[0]).toEqual(await client.models('loras'));
    expect((info.VAELoader!.input!.required!.vae_name as unknown[])[0]).toEqual(['v.safetensors', 'pixel_space']);
    expect((info.UNETLoader!.input!.required!.unet_name as unknown[])[0]).toEqual(['u.safetensors']);
    expect((info.CLIPLoader!.input!.required!.clip_name as unknown[])[0]).toEqual(['c.safetensors']);
  });

  test('loads a checkpoint and a LoRA from their files; another LoRA makes another image', async () => {
    const plain = await imageOf(workflow());
    const ink = await imageOf(workflow({ lora: 'styles/ink.safetensors' }));
    const linked = await imageOf(workflow({ lora: 'linked/l.safetensors' }));
    for (const r of [plain, ink, linked]) expect(r.entry.status).toMatchObject({ status_str: 'success' });
    expect(new Set([plain.bytes.toString('hex'), ink.bytes.toString('hex'), linked.bytes.toString('hex')]).size).toBe(3);
  });

  test('VAELoader, CLIPLoader and UNETLoader open their files', async () => {
    const wf = workflow();
    wf['11'] = { class_type: 'VAELoader', inputs: { vae_name: 'v.safetensors' } };
    wf['12'] = { class_type: 'CLIPLoader', inputs: { clip_name: 'c.safetensors', type: 'stable_diffusion' } };
    wf['13'] = { class_type: 'UNETLoader', inputs: { unet_name: 'u.safetensors', weight_dtype: 'default' } };
    wf['8']!.inputs.vae = ['11', 0];
    wf['6']!.inputs.clip = ['12', 0];
    wf['3']!.inputs.model = ['13', 0];
    const { entry, bytes } = await imageOf(wf);
    expect(entry.status).toMatchObject({ status_str: 'success' });
    expect(bytes.length).toBeGreaterThan(0);
  });

  test('a file that is not a readable safetensors file fails the loader with the engine\'s error', async () => {
    const { entry } = await imageOf(workflow({ lora: 'broken.safetensors' }));
    expect(entry.status).toMatchObject({ status_str: 'error' });
    const error = entry.status!.messages.find(([type]) => type === 'execution_error')![1] as { exception_type: string; exception_message: string; node_id: string };
    expect(error).toMatchObject({ node_id: '10', exception_type: 'safetensors_rust.SafetensorError' });
    expect(error.exception_message).toMatch(/HeaderTooLarge/);
  });

  test('a name outside the list is refused; a path out of the folder is never opened', async () => {
    for (const lora of ['missing.safetensors', '../checkpoints/real.safetensors', 'readme.txt']) {
      const refused = await client.submitPrompt({ prompt: workflow({ lora }) }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(EngineValidationError);
      expect(JSON.stringify((refused as EngineValidationError).body)).toContain('value_not_in_list');
    }
  });

  test('embeddings named in the prompt are loaded (a different image); a missing one is a warning', async () => {
    const plain = await imageOf(workflow({ text: 'a cat' }));
    const named = await imageOf(workflow({ text: 'a cat embedding:ink-embed, ink' }));
    const nested = await imageOf(workflow({ text: 'a cat (embedding:sub/ink-embed.safetensors:1.2)' }));
    const missing = await imageOf(workflow({ text: 'a cat embedding:nowhere' }));
    expect(named.bytes.equals(plain.bytes)).toBe(false);
    expect(nested.bytes.equals(plain.bytes)).toBe(false);
    expect(missing.entry.status).toMatchObject({ status_str: 'success' });
    const lines = (await client.logs()).entries.map((e) => e.m);
    expect(lines.some((l) => l.includes('warning, embedding:nowhere does not exist, ignoring'))).toBe(true);
    expect(lines.some((l) => l.includes('embedding:ink-embed'))).toBe(false);
  });
});
