import { describe, expect, test } from '@jest/globals';
import type { NodeDefinitions } from '#libs/workflow';
import { findModelInputs, ModelInputs } from './model-inputs.js';

const defs: NodeDefinitions = {
  CheckpointLoaderSimple: { input: { required: { ckpt_name: [['a.safetensors', 'b.safetensors'], {}] } } },
  LoraLoader: { input: { required: { lora_name: [[], {}], strength_model: ['FLOAT', {}] } } },
  VAELoader: { input: { required: { vae_name: [['v.safetensors', 'pixel_space']] } } },
  CLIPVisionLoader: { input: { required: { clip_name: [[]] } } },
  UpscaleModelLoader: { input: { required: { model_name: ['COMBO', { options: [] }] } } },
  // A custom node whose list the folders' lists give away.
  FancyStyler: { input: { optional: { style_file: [['x.pt', 'y.pt', 'none']] } } },
  LoadImage: { input: { required: { image: [['photo.png'], { image_upload: true }] } } },
  KSampler: { input: { required: { sampler_name: [['euler', 'dpm']] } } },
};

const models = {
  embeddings: [],
  folders: { checkpoints: ['a.safetensors', 'b.safetensors'], loras: [], vae: ['v.safetensors'], clip_vision: [], upscale_models: [], hypernetworks: ['x.pt', 'y.pt'] },
};

describe('model inputs', () => {
  test('from the lists where they tell, from the loaders\' input names where they cannot', () => {
    const found = Object.fromEntries(findModelInputs(defs, models).map((m) => [`${m.classType}.${m.input}`, `${m.section}:${m.folder}`]));
    expect(found).toEqual({
      'CheckpointLoaderSimple.ckpt_name': 'required:checkpoints',
      'LoraLoader.lora_name': 'required:loras',
      'VAELoader.vae_name': 'required:vae',
      'CLIPVisionLoader.clip_name': 'required:clip_vision',
      'UpscaleModelLoader.model_name': 'required:upscale_models',
      'FancyStyler.style_file': 'optional:hypernetworks',
    });
  });

  test('never a folder the engines do not report, and none when two folders\' lists tie', () => {
    const tied = { embeddings: [], folders: { checkpoints: ['a.safetensors'], diffusion_models: ['a.safetensors'] } };
    const list = findModelInputs({ X: { input: { required: { thing: [['a.safetensors']] } } }, LoraLoader: defs.LoraLoader! }, tied);
    expect(list).toEqual([]);
  });

  test('made once per pair of reports', () => {
    expect(ModelInputs.of(defs, models)).toBe(ModelInputs.of(defs, models));
    expect(ModelInputs.of(defs, models).folderOf('LoraLoader', 'lora_name')).toBe('loras');
    expect(ModelInputs.of(defs, null).list).toEqual([]);
  });
});
