import { describe, expect, test } from '@jest/globals';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { Db } from '#libs/db';
import type { EngineClient } from '#libs/engine-protocol';
import { blake3Hex, type BlobStore } from '#libs/storage';
import type { NodeDefinitions } from '#libs/workflow';
import { isStagedName, removeStagedInputs, removeStagingFolders, stageInputs, stagingFolder, StagingError, withoutStagedNames, type ApiWorkflow, type ModelStaging } from './input-staging.js';
import { ModelCache } from './model-cache.js';

const FOLDER = stagingFolder('secret-secret-secret', 'acct-1');
const ref = (id: string) => ({ __type: 'core/ASSET', info: { id } });

describe('withoutStagedNames', () => {
  test('drops every staging folder\'s files from list choices, both list shapes, and shares the rest', () => {
    const other = stagingFolder('secret-secret-secret', 'acct-2');
    const defs: NodeDefinitions = {
      LoraLoader: { input: { required: { lora_name: [['a.safetensors', `${FOLDER}/0123/x.safetensors`, `${other}\\9\\y.safetensors`], {}], strength_model: ['FLOAT', {}] } } },
      Combo: { input: { optional: { name: ['COMBO', { options: ['b', `${other}/z`] }] } } },
      KSampler: { input: { required: { seed: ['INT', {}] } } },
    };
    const out = withoutStagedNames(defs);
    expect(out.LoraLoader!.input!.required!.lora_name).toEqual([['a.safetensors'], {}]);
    expect(out.Combo!.input!.optional!.name).toEqual(['COMBO', { options: ['b'] }]);
    expect(out.KSampler).toBe(defs.KSampler);
    expect(isStagedName('cloud-styles/x')).toBe(false);
    expect(isStagedName(`${FOLDER}`)).toBe(true);
  });
});

describe('stageInputs with model files', () => {
  const lora = Buffer.alloc(3000, 1);
  const embedding = Buffer.alloc(500, 2);
  const assets = [
    { id: 'lora-1', accountId: 'acct-1', filePath: 'models/loras/styles/ink.safetensors', blobHash: blake3Hex(lora), contentType: 'application/octet-stream' },
    { id: 'emb-1', accountId: 'acct-1', filePath: 'models/embeddings/sub/glow.safetensors', blobHash: blake3Hex(embedding), contentType: 'application/octet-stream' },
  ];
  const sizes = new Map([[blake3Hex(lora), lora.length], [blake3Hex(embedding), embedding.length]]);
  const db = {
    asset: { findMany: async ({ where }: { where: { id: { in: string[] }; accountId: string } }) => assets.filter((a) => where.id.in.includes(a.id) && a.accountId === where.accountId) },
    blob: { findUnique: async ({ where }: { where: { hash: string } }) => (sizes.has(where.hash) ? { sizeBytes: BigInt(sizes.get(where.hash)!) } : null) },
  } as unknown as Db;
  const bytes = new Map([[blake3Hex(lora), lora], [blake3Hex(embedding), embedding]]);
  const store = { read: async (hash: string) => Readable.from([bytes.get(hash)!]) } as unknown as BlobStore;
  const engine = {} as EngineClient;

  function setup() {
    const root = mkdtempSync(path.join(tmpdir(), 'staging-'));
    const modelsDir = path.join(root, 'models');
    mkdirSync(path.join(modelsDir, 'loras'), { recursive: true });
    const cache = new ModelCache(store, { dir: path.join(root, 'cache'), maxBytes: 1e6 });
    return { modelsDir, cache };
  }

  const workflow = (): ApiWorkflow => ({
    '1': { class_type: 'LoraLoader', inputs: { lora_name: ref('lora-1'), model: ['4', 0], clip: ['4', 1], strength_model: 1, strength_clip: 1 } },
    '2': { class_type: 'CLIPTextEncode', inputs: { text: 'a cat embedding:glow, (embedding:glow:1.1) embedding:shared', clip: ['1', 1], 'cloud_embedding:glow': ref('emb-1') } },
  });

  test('links each file from the cache under the account\'s folder and rewrites names and embeddings', async () => {
    const { modelsDir, cache } = setup();
    const models: ModelStaging = { cache, modelsDir };
    const staged = await stageInputs(workflow(), null, 'acct-1', FOLDER, db, store, engine, models);
    const loraName = `${FOLDER}/${blake3Hex(lora).slice(0, 16)}/styles/ink.safetensors`;
    const embName = `${FOLDER}/${blake3Hex(embedding).slice(0, 16)}/sub/glow.safetensors`;
    expect(staged.workflow['1']!.inputs.lora_name).toBe(loraName);
    expect(staged.workflow['2']!.inputs).toEqual({ text: `a cat embedding:${embName}, (embedding:${embName}:1.1) embedding:shared`, clip: ['1', 1] });
    const linked = path.join(modelsDir, 'loras', loraName);
    expect(readFileSync(linked).equals(lora)).toBe(true);
    expect(lstatSync(linked).isSymbolicLink()).toBe(false);
    expect(lstatSync(linked).ino).toBe(lstatSync(cache.pathOf(blake3Hex(lora))).ino);
    expect(readdirSync(path.join(modelsDir, 'loras'))).toEqual([FOLDER]);
    expect(staged.tenantNames.get(loraName)).toBe('styles/ink.safetensors');
    expect(staged.tenantNames.get(embName.replace(/\.safetensors$/, ''))).toBe('sub/glow');
    await removeStagedInputs('', staged);
    // Taken back after the job's end, before the next job stages anything.
    await models.releasing;
    expect(readdirSync(path.join(modelsDir, 'loras'))).toEqual([]);
    expect(existsSync(path.join(modelsDir, 'embeddings', FOLDER))).toBe(false);
    // The cache keeps its copy for the next job.
    expect(cache.has(blake3Hex(lora))).toBe(true);
  });

  test('a worker starting removes the staging folders a run that died left behind, and only those', async () => {
    const { modelsDir } = setup();
    mkdirSync(path.join(modelsDir, 'loras', stagingFolder('secret-secret-secret', 'acct-9'), 'old'), { recursive: true });
    mkdirSync(path.join(modelsDir, 'embeddings', stagingFolder('secret-secret-secret', 'acct-1')), { recursive: true });
    mkdirSync(path.join(modelsDir, 'loras', 'cloud-styles'), { recursive: true });
    writeFileSync(path.join(modelsDir, 'loras', 'shared.safetensors'), 'x');
    await removeStagingFolders(modelsDir);
    expect(readdirSync(path.join(modelsDir, 'loras')).sort()).toEqual(['cloud-styles', 'shared.safetensors']);
    expect(readdirSync(path.join(modelsDir, 'embeddings'))).toEqual([]);
  });

  test('fails clearly without the engine\'s model folder, and for an embedding input that is no embedding', async () => {
    const { cache, modelsDir } = setup();
    const missing = await stageInputs(workflow(), null, 'acct-1', FOLDER, db, store, engine, { cache, modelsDir: '' }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(StagingError);
    expect((missing as StagingError).code).toBe('models_unavailable');
    const wrong = workflow();
    wrong['2']!.inputs['cloud_embedding:glow'] = ref('lora-1');
    const refused = await stageInputs(wrong, null, 'acct-1', FOLDER, db, store, engine, { cache, modelsDir }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StagingError);
    expect(readdirSync(path.join(modelsDir, 'loras'))).toEqual([]);
    // Another account's asset is not found.
    const theirs = await stageInputs(workflow(), null, 'acct-2', FOLDER, db, store, engine, { cache, modelsDir }).catch((e: unknown) => e);
    expect((theirs as StagingError).code).toBe('missing_asset');
    writeFileSync(path.join(modelsDir, 'loras', 'shared.safetensors'), 'x');
    expect(readdirSync(path.join(modelsDir, 'loras'))).toEqual(['shared.safetensors']);
  });
});
