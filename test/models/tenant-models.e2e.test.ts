/**
 * A tenant's own models, end to end against the real processes, on the local store and on S3:
 * tenant A uploads a LoRA (multipart), a checkpoint (resumably, interrupted halfway and resumed)
 * and an embedding (imported from a URL), sees them in its node definitions and model lists on
 * both surfaces, runs workflows that load them; tenant B can see, list, name or load none of it.
 * The worker's cache holds each file once, the engine keeps nothing of them after the job, and a
 * deleted model leaves every worker's cache.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Redis } from 'ioredis';
import sharp from 'sharp';
import { Upload as TusUpload } from 'tus-js-client';
import { jobKeys } from '#libs/jobs';
import { blake3Hex } from '#libs/storage';
import { startCloud, type Cloud } from '../support/cloud.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { bearer, call, envelopeCode, jsonInit, uploadForm, type Reply } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { safetensors } from '../support/safetensors.js';
import { PrivateS3 } from '../support/services.js';
import { SHARED_SERVICES, TestStack, type StorageKind } from '../support/stack.js';

const MB = 1024 * 1024;
const b64 = (s: string) => Buffer.from(s).toString('base64');
const metadata = (fields: Record<string, string>) => Object.entries(fields).map(([k, v]) => `${k} ${b64(v)}`).join(',');

/** The stock text-to-image chain with a LoRA between the checkpoint and the sampler. */
function loraWorkflow(ckpt: unknown, lora: unknown, text = 'a cat'): Record<string, any> {
  return {
    '4': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: ckpt } },
    '10': { class_type: 'LoraLoader', inputs: { model: ['4', 0], clip: ['4', 1], lora_name: lora, strength_model: 0.8, strength_clip: 1 } },
    '5': { class_type: 'EmptyLatentImage', inputs: { width: 64, height: 64, batch_size: 1 } },
    '6': { class_type: 'CLIPTextEncode', inputs: { text, clip: ['10', 1] } },
    '7': { class_type: 'CLIPTextEncode', inputs: { text: 'blurry', clip: ['10', 1] } },
    '3': { class_type: 'KSampler', inputs: { seed: 7, steps: 2, cfg: 8, sampler_name: 'euler', scheduler: 'normal', denoise: 1, model: ['10', 0], positive: ['6', 0], negative: ['7', 0], latent_image: ['5', 0] } },
    '8': { class_type: 'VAEDecode', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '9': { class_type: 'SaveImage', inputs: { filename_prefix: 'tenant-model', images: ['8', 0] } },
  };
}

/** Choices of a list input in a node definition, either list shape. */
function choicesOf(defs: any, cls: string, input: string): string[] {
  const entry = defs[cls].input.required[input];
  return Array.isArray(entry[0]) ? entry[0] : entry[1].options;
}

/** A PATCH whose connection breaks after `sendBytes` of `body` have gone out. */
function interruptedPatch(url: string, key: string, offset: number, body: Buffer, sendBytes: number): Promise<void> {
  return new Promise((resolve) => {
    const req = httpRequest(url, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${key}`, 'tus-resumable': '1.0.0', 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream', 'content-length': String(body.length) },
    });
    req.on('error', () => resolve());
    req.on('response', (res) => {
      res.resume();
      resolve();
    });
    req.write(body.subarray(0, sendBytes), () => setTimeout(() => req.destroy(), 500));
  });
}

describe.each<StorageKind>(['local', 's3'])('tenant model files on the %s store', (storage) => {
  let s3: PrivateS3 | null = null;
  let stack: TestStack;
  let cloud: Cloud;
  let api: string;
  let redis: Redis;
  let files: Server;
  let filesUrl: string;
  let root: string;
  let modelsDir: string;
  let cacheDir: string;
  const A = { id: '', key: '' };
  const B = { id: '', key: '' };
  const lora = safetensors(64 * 1024, { format: 'pt', trigger: 'ink style' });
  const checkpoint = safetensors(6 * MB);
  const embedding = safetensors(3 * 1024);
  const bigFile = randomBytes(9 * MB);
  const assets: Record<string, any> = {};

  const v2 = (key: string, path: string, init: RequestInit = {}) => call(`${api}${path}`, { ...init, headers: { ...bearer(key), ...(init.headers as Record<string, string>) } });
  const v1 = (key: string, path: string, init: RequestInit = {}) => call(`${api}${path}`, { ...init, headers: { 'x-api-key': key, ...(init.headers as Record<string, string>) } });
  const tus = (key: string, url: string, method: string, headers: Record<string, string> = {}, body?: Buffer) =>
    call(url.startsWith('http') ? url : `${api}${url}`, { method, headers: { ...bearer(key), 'tus-resumable': '1.0.0', ...headers }, body });
  const createUpload = (key: string, length: number, fields: Record<string, string>) => tus(key, '/api/v2/uploads', 'POST', { 'upload-length': String(length), 'upload-metadata': metadata(fields) });
  const submit = (key: string, workflow: unknown) => v2(key, '/api/v2/jobs', jsonInit('POST', { workflow }, { prefer: 'wait=30' }));
  /** The pixels of a job's image (its PNG also carries the workflow as sent, which differs by spelling). */
  const pixels = async (job: Reply) => {
    const png = Buffer.from(await (await fetch(job.body.outputs[0].url)).arrayBuffer());
    return createHash('sha256').update(await sharp(png).raw().toBuffer()).digest('hex');
  };

  beforeAll(async () => {
    if (storage === 's3') s3 = await new PrivateS3().start();
    stack = new TestStack(storage, s3 ? { ...SHARED_SERVICES, s3Endpoint: s3.endpoint } : SHARED_SERVICES);
    await stack.open();
    root = `/tmp/${stack.name}`;
    modelsDir = `${root}/engine-models`;
    cacheDir = `${root}/model-cache`;
    // The engine's own (shared) models: a LoRA and a checkpoint named like A's files.
    for (const [rel, bytes] of [['loras/shared-style.safetensors', safetensors()], ['checkpoints/mine.safetensors', safetensors()], ['embeddings/shared-emb.safetensors', safetensors(256)]] as const) {
      mkdirSync(`${modelsDir}/${rel.split('/')[0]}`, { recursive: true });
      writeFileSync(`${modelsDir}/${rel}`, bytes);
    }
    redis = new Redis(TEST_REDIS_URL);
    // The "model hub" A imports from: loopback, which this API is allowed to reach.
    files = createServer((req, res) => {
      if (req.url === '/glow.safetensors') return void res.end(embedding);
      if (req.url === '/big.bin') return void res.end(bigFile);
      if (req.url === '/to-metadata') return void res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      if (req.url === '/to-private') return void res.writeHead(301, { location: 'http://10.0.0.1/model.safetensors' }).end();
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
    filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    cloud = await startCloud(stack, {
      engine: { SIM_MODELS_DIR: modelsDir, SIM_STEP_MS: '1', SIM_IMAGE_SCALE: '0.125' },
      worker: { ENGINE_MODELS_DIR: modelsDir, MODEL_CACHE_DIR: cacheDir, MODEL_CACHE_CHECK_SECONDS: '2' },
      api: { OUTBOUND_ALLOW_LOOPBACK: 'true', MAX_RESUMABLE_UPLOAD_BYTES: String(32 * MB), URL_IMPORT_MAX_BYTES: String(8 * MB) },
    });
    api = cloud.api.url;
    Object.assign(A, await stack.account({ name: 'alice' }));
    Object.assign(B, await stack.account({ name: 'bob' }));
    // The engine has reported its folders (the API checks model paths against them).
    await waitUntil(async () => (await v1(A.key, '/api/models')).status === 200, 20_000, 'the engine\'s model folders');
  }, 120_000);

  afterAll(async () => {
    redis?.disconnect();
    await new Promise((resolve) => files?.close(resolve));
    await stack?.close();
    await s3?.stop();
  });

  it('takes a LoRA by multipart upload, a checkpoint resumably (interrupted halfway, resumed) and an embedding from a URL', async () => {
    const up = await v2(A.key, '/api/v2/assets', { method: 'POST', body: uploadForm(lora, 'ink.safetensors', { file_path: 'models/loras/styles/ink.safetensors' }) });
    expect([up.status, up.body.file_path, up.body.hash]).toEqual([201, 'models/loras/styles/ink.safetensors', `blake3:${blake3Hex(lora)}`]);
    assets.lora = up.body;

    const created = await createUpload(A.key, checkpoint.length, { file_path: 'models/checkpoints/mine.safetensors', expected_hash: `blake3:${blake3Hex(checkpoint)}` });
    expect(created.status).toBe(201);
    const location = created.headers.get('location')!;
    expect(location).toMatch(new RegExp(`^${api}/api/v2/uploads/[0-9a-f]{12}-[0-9a-f]{32}$`));
    await interruptedPatch(location, A.key, 0, checkpoint, checkpoint.length / 2);
    let offset = 0;
    await waitUntil(async () => {
      const head = await tus(A.key, location, 'HEAD');
      offset = Number(head.headers.get('upload-offset'));
      return head.status === 200 && offset > 0;
    }, 15_000, 'the interrupted upload\'s offset');
    expect(offset).toBeLessThanOrEqual(checkpoint.length / 2);
    expect(Number((await tus(A.key, location, 'HEAD')).headers.get('upload-length'))).toBe(checkpoint.length);
    // B cannot see or touch A's upload: the same answers as for an id nobody has.
    const unknown = location.replace(/[0-9a-f]{32}$/, 'f'.repeat(32));
    for (const url of [location, unknown]) {
      expect((await tus(B.key, url, 'HEAD')).status).toBe(404);
      const patched = await tus(B.key, url, 'PATCH', { 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, checkpoint.subarray(offset));
      expect([patched.status, envelopeCode(patched)]).toEqual([404, 'not_found']);
    }
    const resumed = await tus(A.key, location, 'PATCH', { 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, checkpoint.subarray(offset));
    expect([resumed.status, resumed.body.file_path, resumed.body.hash, resumed.body.size_bytes, resumed.body.created_new]).toEqual([200, 'models/checkpoints/mine.safetensors', `blake3:${blake3Hex(checkpoint)}`, checkpoint.length, true]);
    assets.checkpoint = resumed.body;
    // The upload became the asset: nothing is left to resume.
    expect((await tus(A.key, location, 'HEAD')).status).toBe(404);

    const imported = await v2(A.key, '/api/v2/assets/from-url', jsonInit('POST', { url: `${filesUrl}/glow.safetensors`, file_path: 'models/embeddings/glow.safetensors' }));
    expect([imported.status, imported.body.hash]).toEqual([201, `blake3:${blake3Hex(embedding)}`]);
    assets.embedding = imported.body;
  });

  it('takes an upload from an unchanged tus client (tus-js-client), in chunks', async () => {
    const second = safetensors(200 * 1024);
    const body = await new Promise<any>((resolve, reject) => {
      const upload = new TusUpload(second, {
        endpoint: `${api}/api/v2/uploads`,
        headers: bearer(A.key),
        metadata: { filename: 'models/loras/sketch.safetensors' },
        chunkSize: 64 * 1024,
        retryDelays: [],
        onError: reject,
        onSuccess: ({ lastResponse }) => resolve(JSON.parse(lastResponse.getBody())),
      });
      upload.start();
    });
    expect([body.file_path, body.hash]).toEqual(['models/loras/sketch.safetensors', `blake3:${blake3Hex(second)}`]);
    assets.sketch = body;
  });

  it('shows A its model files beside the shared ones, on both surfaces; B sees only the shared ones', async () => {
    const aInfo = (await v1(A.key, '/api/object_info')).body;
    const bInfo = (await v1(B.key, '/api/object_info')).body;
    expect(choicesOf(aInfo, 'LoraLoader', 'lora_name')).toEqual(['shared-style.safetensors', 'sketch.safetensors', 'styles/ink.safetensors']);
    expect(choicesOf(bInfo, 'LoraLoader', 'lora_name')).toEqual(['shared-style.safetensors']);
    expect(choicesOf(aInfo, 'CheckpointLoaderSimple', 'ckpt_name')).toContain('mine.safetensors');
    expect(JSON.stringify(bInfo)).not.toContain('styles/ink');
    expect((await v1(A.key, '/api/object_info/LoraLoaderModelOnly')).body.LoraLoaderModelOnly.input.required.lora_name[0]).toContain('styles/ink.safetensors');
    expect((await v1(B.key, '/api/object_info/LoraLoaderModelOnly')).body.LoraLoaderModelOnly.input.required.lora_name[0]).toEqual(['shared-style.safetensors']);

    expect((await v1(A.key, '/api/models/loras')).body).toEqual(['shared-style.safetensors', 'sketch.safetensors', 'styles/ink.safetensors']);
    expect((await v1(B.key, '/api/models/loras')).body).toEqual(['shared-style.safetensors']);
    expect((await v1(A.key, '/api/experiment/models/checkpoints')).body).toContainEqual({ name: 'mine.safetensors', pathIndex: 0 });
    expect((await v1(A.key, '/api/embeddings')).body).toEqual(['shared-emb', 'glow']);
    expect((await v1(B.key, '/api/embeddings')).body).toEqual(['shared-emb']);
    // The header of A's own file is read; B gets what it gets for a name that is nowhere.
    const meta = await v1(A.key, '/api/view_metadata/loras?filename=styles/ink.safetensors');
    expect([meta.status, meta.body]).toEqual([200, { format: 'pt', trigger: 'ink style' }]);
    const theirs = await v1(B.key, '/api/view_metadata/loras?filename=styles/ink.safetensors');
    const nowhere = await v1(B.key, '/api/view_metadata/loras?filename=nowhere.safetensors');
    expect([theirs.status, theirs.text]).toEqual([nowhere.status, nowhere.text]);
  });

  it('runs A\'s workflow loading its checkpoint, LoRA and embedding (v2 and v1); B can name or load none of them', async () => {
    const mine = await submit(A.key, loraWorkflow('mine.safetensors', 'styles/ink.safetensors', 'a cat, embedding:glow'));
    expect([mine.status, mine.body.status, mine.body.error]).toEqual([201, 'succeeded', null]);
    // Its own files, not the engine's shared checkpoint of the same name nor its other LoRA.
    const shared = await submit(B.key, loraWorkflow('mine.safetensors', 'shared-style.safetensors', 'a cat, embedding:glow'));
    expect(shared.body.status).toBe('succeeded');
    expect(await pixels(mine)).not.toBe(await pixels(shared));
    // Without its embedding A's prompt gives another image: the embedding was loaded.
    expect(await pixels(await submit(A.key, loraWorkflow('mine.safetensors', 'styles/ink.safetensors', 'a cat,')))).not.toBe(await pixels(mine));
    // By asset reference in the model slots: the same files, the same image.
    const byRef = await submit(A.key, loraWorkflow({ __type: 'core/ASSET', info: { id: assets.checkpoint.id } }, { __type: 'core/ASSET', info: { id: assets.lora.id } }, 'a cat, embedding:glow'));
    expect(await pixels(byRef)).toBe(await pixels(mine));
    // The job's record shows the names A used, and its log none of the engine's.
    expect((await v2(A.key, `/api/v2/jobs/${mine.body.id}/workflow`)).text).not.toContain('cloud-');
    const log = await v2(A.key, `/api/v2/jobs/${mine.body.id}/logs`);
    expect(log.text).not.toMatch(/cloud-|does not exist/);
    // B's prompt naming A's embedding runs without it, as the engine does with a name it lacks.
    const bLog = await v2(B.key, `/api/v2/jobs/${shared.body.id}/logs`);
    expect(bLog.text).toContain('warning, embedding:glow does not exist, ignoring');

    // v1: the same workflow, by name.
    const v1Prompt = await v1(A.key, '/api/prompt', jsonInit('POST', { prompt: loraWorkflow('mine.safetensors', 'styles/ink.safetensors') }));
    expect([v1Prompt.status, v1Prompt.body.node_errors]).toEqual([200, {}]);
    await waitUntil(async () => (await v2(A.key, `/api/v2/jobs/${v1Prompt.body.prompt_id}`)).body.status === 'succeeded', 20_000, 'the v1 job');

    // B names A's LoRA: not in the list, on both surfaces, exactly as a name nobody has.
    const named = await submit(B.key, loraWorkflow('v1-5-pruned-emaonly.safetensors', 'styles/ink.safetensors'));
    const nobody = await submit(B.key, loraWorkflow('v1-5-pruned-emaonly.safetensors', 'styles/nothing.safetensors'));
    expect([named.status, envelopeCode(named)]).toEqual([422, 'invalid_workflow']);
    expect(named.text.replaceAll('styles/ink', 'X')).toBe(nobody.text.replaceAll('styles/nothing', 'X'));
    const v1Named = await v1(B.key, '/api/prompt', jsonInit('POST', { prompt: loraWorkflow('v1-5-pruned-emaonly.safetensors', 'styles/ink.safetensors') }));
    expect([v1Named.status, v1Named.body.error?.type]).toEqual([400, 'prompt_outputs_failed_validation']);
    expect(v1Named.text).toContain('value_not_in_list');
    // B references A's asset: missing, as an id nobody has.
    const refd = await submit(B.key, loraWorkflow('v1-5-pruned-emaonly.safetensors', { __type: 'core/ASSET', info: { id: assets.lora.id } }));
    expect([refd.status, envelopeCode(refd)]).toEqual([422, 'missing_asset']);
    // A's own asset that is no LoRA (its checkpoint) in the LoRA slot is refused as not in the list.
    const wrong = await submit(A.key, loraWorkflow('mine.safetensors', { __type: 'core/ASSET', info: { id: assets.checkpoint.id } }));
    expect([wrong.status, envelopeCode(wrong)]).toEqual([422, 'invalid_workflow']);
  });

  it('leaves nothing of a job\'s files in the engine\'s folders or in what the engines report', async () => {
    for (const folder of ['loras', 'checkpoints', 'embeddings']) {
      expect(readdirSync(`${modelsDir}/${folder}`).filter((n) => n.startsWith('cloud-'))).toEqual([]);
    }
    const keys = jobKeys(stack.redisPrefix);
    expect(await redis.get(keys.nodeDefinitions)).not.toContain('cloud-');
    expect(await redis.get(keys.engineModels)).not.toContain('cloud-');
  });

  it('keeps each model once in the worker\'s cache, by its blake3, and serves later jobs from it', async () => {
    const cached = readdirSync(`${cacheDir}/blake3`).sort();
    expect(cached).toEqual([blake3Hex(lora), blake3Hex(checkpoint), blake3Hex(embedding)].sort());
    const inode = statSync(`${cacheDir}/blake3/${blake3Hex(checkpoint)}`).ino;
    const again = await submit(A.key, loraWorkflow('mine.safetensors', 'sketch.safetensors'));
    expect(again.body.status).toBe('succeeded');
    expect(statSync(`${cacheDir}/blake3/${blake3Hex(checkpoint)}`).ino).toBe(inode);
    expect(readdirSync(`${cacheDir}/blake3`).sort()).toEqual([...cached, assets.sketch.hash.slice('blake3:'.length)].sort());
  });

  it('refuses model files in a folder the engines lack, past the account\'s limit, past the resumable limit, or with another hash', async () => {
    const bad = await v2(A.key, '/api/v2/assets', { method: 'POST', body: uploadForm(lora, 'x.safetensors', { file_path: 'models/lora/x.safetensors' }) });
    expect([bad.status, envelopeCode(bad)]).toEqual([400, 'invalid_request']);
    expect(bad.body.error.message).toContain('"lora" is not one of');
    expect(envelopeCode(await createUpload(A.key, 10, { file_path: 'models/nothing/x.safetensors' }))).toBe('invalid_request');

    const tooBig = await createUpload(A.key, 33 * MB, { file_path: 'models/checkpoints/huge.safetensors' });
    expect([tooBig.status, envelopeCode(tooBig)]).toEqual([413, 'payload_too_large']);

    // A small limit for B: every route that records a model file refuses it past the limit.
    await stack.accounts.setLimits(B.id, { maxModelBytes: BigInt(100 * 1024) });
    // As the admin command does: the API's cached accounts are stale now.
    await redis.publish(`${stack.redisPrefix}:auth:changed`, 'test');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const created = await createUpload(B.key, 200 * 1024, { file_path: 'models/loras/b.safetensors' });
    expect([created.status, envelopeCode(created)]).toEqual([413, 'storage_limit_exceeded']);
    expect(created.body.error.details).toEqual({ limit_bytes: 100 * 1024, used_bytes: 0, file_bytes: 200 * 1024 });
    const multipart = await v2(B.key, '/api/v2/assets', { method: 'POST', body: uploadForm(safetensors(120 * 1024), 'b.safetensors', { file_path: 'models/loras/b.safetensors' }) });
    expect([multipart.status, envelopeCode(multipart)]).toEqual([413, 'storage_limit_exceeded']);
    const fits = await v2(B.key, '/api/v2/assets', { method: 'POST', body: uploadForm(safetensors(60 * 1024), 'b.safetensors', { file_path: 'models/loras/b.safetensors' }) });
    expect(fits.status).toBe(201);
    // The account shows what its model files take, against its limit.
    const account = (await v2(B.key, '/api/v2/account')).body;
    expect([account.usage.model_bytes, account.limits.max_model_bytes]).toEqual([fits.body.size_bytes, 100 * 1024]);
    // The same bytes under a second model path cost nothing more; other bytes do.
    expect((await v2(B.key, '/api/v2/assets/from-hash', jsonInit('POST', { hash: fits.body.hash, file_path: 'models/loras/copy.safetensors' }))).status).toBe(201);
    const second = await v2(B.key, '/api/v2/assets', { method: 'POST', body: uploadForm(safetensors(60 * 1024), 'c.safetensors', { file_path: 'models/loras/c.safetensors' }) });
    expect([second.status, envelopeCode(second)]).toEqual([413, 'storage_limit_exceeded']);
    // The refused bytes were not kept.
    expect((await v2(B.key, '/api/v2/assets', { method: 'POST', body: uploadForm(safetensors(60 * 1024), 'c.bin', { file_path: 'not-a-model.bin' }) })).status).toBe(201);

    const mismatch = await createUpload(A.key, 1000, { file_path: 'models/loras/m.safetensors', expected_hash: `blake3:${'0'.repeat(64)}` });
    const wrong = await tus(A.key, mismatch.headers.get('location')!, 'PATCH', { 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, randomBytes(1000));
    expect([wrong.status, envelopeCode(wrong)]).toEqual([409, 'hash_mismatch']);
    expect((await tus(A.key, mismatch.headers.get('location')!, 'HEAD')).status).toBe(404);
  });

  it('imports from URLs under the outbound rules: no redirect to a private or metadata address, a size cap', async () => {
    for (const path of ['/to-metadata', '/to-private']) {
      const refused = await v2(A.key, '/api/v2/assets/from-url', jsonInit('POST', { url: `${filesUrl}${path}`, file_path: 'models/loras/r.safetensors' }));
      expect([refused.status, envelopeCode(refused), refused.body.error.details]).toEqual([422, 'import_failed', { reason: 'blocked_address' }]);
    }
    const big = await v2(A.key, '/api/v2/assets/from-url', jsonInit('POST', { url: `${filesUrl}/big.bin` }));
    expect([big.status, envelopeCode(big)]).toEqual([413, 'payload_too_large']);
    const missing = await v2(A.key, '/api/v2/assets/from-url', jsonInit('POST', { url: `${filesUrl}/nothing` }));
    expect([missing.status, missing.body.error.details]).toEqual([422, { reason: 'http_status', status: 404 }]);
    const scheme = await v2(A.key, '/api/v2/assets/from-url', jsonInit('POST', { url: 'file:///etc/passwd' }));
    expect([scheme.status, envelopeCode(scheme)]).toEqual([400, 'invalid_request']);
  });

  it('keeps nothing of finished, refused or abandoned uploads in the upload store', async () => {
    const abandoned = await createUpload(A.key, 5000, { file_path: 'models/loras/gone.safetensors' });
    await tus(A.key, abandoned.headers.get('location')!, 'PATCH', { 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, randomBytes(2000));
    expect((await tus(B.key, abandoned.headers.get('location')!, 'DELETE')).status).toBe(404);
    expect((await tus(A.key, abandoned.headers.get('location')!, 'DELETE')).status).toBe(204);
    expect((await tus(A.key, abandoned.headers.get('location')!, 'HEAD')).status).toBe(404);
    if (storage === 's3') {
      const client = new S3Client({ endpoint: s3!.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
      const left = async () => ((await client.send(new ListObjectsV2Command({ Bucket: stack.bucket, Prefix: 'uploads/' }))).Contents ?? []).map((o) => o.Key);
      // The last short part of the abandoned upload goes just after the answer.
      await waitUntil(async () => (await left()).length === 0, 5_000, 'the upload store to be empty').catch(async () => expect(await left()).toEqual([]));
    } else {
      expect(readdirSync(`${stack.blobDir}/uploads`)).toEqual([]);
    }
  });

  it('drops a deleted model from the worker\'s cache: at once when announced, and on the periodic check', async () => {
    const sketch = `${cacheDir}/blake3/${assets.sketch.hash.slice(7)}`;
    expect(existsSync(sketch)).toBe(true);
    expect((await v2(A.key, `/api/v2/assets/${assets.sketch.id}`, { method: 'DELETE' })).status).toBe(204);
    await waitUntil(() => !existsSync(sketch), 5_000, 'the deleted LoRA to leave the cache');
    // Gone from A's lists too.
    expect((await v1(A.key, '/api/models/loras')).body).not.toContain('sketch.safetensors');

    // A deletion the workers are not told of (the blob removed behind the API's back) is found by the check.
    const embeddingFile = `${cacheDir}/blake3/${blake3Hex(embedding)}`;
    expect(existsSync(embeddingFile)).toBe(true);
    await stack.db.asset.deleteMany({ where: { blobHash: blake3Hex(embedding) } });
    await stack.db.blob.deleteMany({ where: { hash: blake3Hex(embedding) } });
    await waitUntil(() => !existsSync(embeddingFile), 8_000, 'the periodic check to drop the embedding');
  });
});
