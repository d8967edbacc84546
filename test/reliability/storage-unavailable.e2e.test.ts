import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { open, rm, statfs } from 'node:fs/promises';
import path from 'node:path';
import { blake3Hex } from '#libs/storage';
import { startCloud } from '../support/cloud.js';
import { bearer, call, type Reply } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { freePort } from '../support/services.js';
import { TestStack } from '../support/stack.js';
import { testPng } from '../v1/v1-world.js';

/**
 * A blob store that will not take writes: a full local disk, and an S3 endpoint that is down.
 * Readiness must say so (the API's and the worker's), and uploads must answer 503
 * service_unavailable with Retry-After, keeping nothing: no blob, no asset, no temporary file.
 */
const report = new ReliabilityReport('Faults: storage', 2.5);
afterAll(() => report.save());

const PROBE_INTERVAL = { STORAGE_WRITE_PROBE_INTERVAL_MS: '200' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function form(field: string, bytes: Uint8Array, fileName: string, fields: Record<string, string> = {}): FormData {
  const body = new FormData();
  for (const [name, value] of Object.entries(fields)) body.append(name, value);
  body.append(field, new Blob([bytes]), fileName);
  return body;
}

const v2Upload = (api: string, key: string, bytes: Uint8Array) => call(`${api}/api/v2/assets`, { method: 'POST', headers: bearer(key), body: form('file', bytes, 'photo.png') });
const v1Upload = (api: string, key: string, bytes: Uint8Array, route = 'image', fields: Record<string, string> = {}) =>
  call(`${api}/api/upload/${route}`, { method: 'POST', headers: { 'x-api-key': key }, body: form('image', bytes, 'photo.png', fields) });

async function readiness(url: string): Promise<Reply> {
  return call(`${url}/readyz`);
}

/** Polls until /readyz reports `storage` as wanted (the probe result is reused for its interval). */
async function storageCheck(url: string, ok: boolean): Promise<Reply> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const ready = await readiness(url);
    if ((ready.body?.checks?.storage === 'ok') === ok || Date.now() > deadline) return ready;
    await sleep(100);
  }
}

/** A refused upload as promised: 503, the envelope's `service_unavailable`, a Retry-After in whole seconds. */
function refusedAsPromised(reply: Reply): boolean {
  return reply.status === 503 && reply.body?.error?.code === 'service_unavailable' && typeof reply.body.error.message === 'string' && /^[1-9]\d*$/.test(reply.headers.get('retry-after') ?? '');
}

const describeReply = (r: Reply) => `${r.status} ${r.body?.error?.code ?? ''} Retry-After ${r.headers.get('retry-after')}`;

/** Fills a file system to the last byte; ENOSPC ends it. */
async function fill(file: string): Promise<void> {
  const handle = await open(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) await handle.write(chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    await handle.close();
  }
  // Whatever room is left is smaller than a chunk: take it byte by byte.
  const rest = await open(file, 'a');
  try {
    for (;;) await rest.write(Buffer.alloc(1024, 1));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    await rest.close();
  }
}

describe('local store on a disk that is full', () => {
  const stack = new TestStack('local');
  const disk = `/tmp/${stack.name}-disk`;
  const blobs = path.join(disk, 'blobs');
  const filler = path.join(disk, 'filler');
  /** A real 1 MiB tmpfs when this user may mount one; otherwise the store's temporary folder is replaced by a file, so no upload can be written. */
  let mode: 'tmpfs' | 'tmp-folder-is-a-file' = 'tmpfs';
  let api: RunningProcess;
  let worker: RunningProcess;

  beforeAll(async () => {
    mkdirSync(disk, { recursive: true });
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', disk]).status !== 0) mode = 'tmp-folder-is-a-file';
    mkdirSync(blobs, { recursive: true });
    await stack.open();
    const cloud = await startCloud(stack, { api: { STORAGE_DIR: blobs, ...PROBE_INTERVAL }, worker: { STORAGE_DIR: blobs, ...PROBE_INTERVAL } });
    api = cloud.api;
    worker = cloud.workers[0]!;
  }, 60_000);
  afterAll(async () => {
    await stack.close();
    if (mode === 'tmpfs') spawnSync('umount', [disk]);
    rmSync(disk, { recursive: true, force: true });
  });

  /** Makes the store refuse writes, as the mode allows; returns the undo. */
  async function breakDisk(): Promise<() => Promise<void>> {
    if (mode === 'tmpfs') {
      await fill(filler);
      return () => rm(filler, { force: true });
    }
    const tmp = path.join(blobs, 'tmp');
    rmSync(tmp, { recursive: true, force: true });
    writeFileSync(tmp, 'not a folder');
    return async () => {
      rmSync(tmp, { force: true });
      mkdirSync(tmp);
    };
  }

  /** What a refused upload kept: no blob file, no temporary file, no blob or asset row is the promise. */
  async function kept(accountId: string, bytes: Uint8Array) {
    const hash = blake3Hex(Buffer.from(bytes));
    return {
      blobFile: existsSync(path.join(blobs, 'blake3', hash)),
      tempFiles: mode === 'tmpfs' ? readdirSync(path.join(blobs, 'tmp')) : [],
      blobRows: await stack.db.blob.count({ where: { hash } }),
      assets: await stack.db.asset.count({ where: { accountId } }),
    };
  }
  const NOTHING = { blobFile: false, tempFiles: [], blobRows: 0, assets: 0 };

  it('takes the API and the worker out of readiness, refuses uploads on v2 and v1 with 503, keeps nothing, and recovers once there is room', async () => {
    const owner = await stack.account();
    const a = await stack.account();
    // An original for the mask upload, stored while there is room.
    const original = await v1Upload(api.url, owner.key, testPng(4, 4, 1));
    expect(original.status).toBe(200);
    expect((await readiness(api.url)).body).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', storage: 'ok', load: 'ok' } });
    expect((await readiness(worker.url)).status).toBe(200);

    // Room for half an upload: the disk fills while its bytes stream in.
    const refusals: Reply[] = [];
    const leftovers: unknown[] = [];
    const big = new Uint8Array(700 * 1024).map((_, i) => (i * 7) & 0xff);
    if (mode === 'tmpfs') {
      const handle = await open(filler, 'w');
      await handle.write(Buffer.alloc(1024 * 1024 - 350 * 1024 - (await usedBytes(disk)), 1));
      await handle.close();
      refusals.push(await v2Upload(api.url, a.key, big));
      leftovers.push(await kept(a.id, big));
      await rm(filler, { force: true });
    }

    const restore = await breakDisk();
    const apiReady = await storageCheck(api.url, false);
    const workerReady = await storageCheck(worker.url, false);
    const bytes = testPng(16, 16, 7);
    refusals.push(
      await v2Upload(api.url, a.key, bytes),
      await v1Upload(api.url, a.key, bytes),
      await v1Upload(api.url, owner.key, testPng(4, 4, 9, true), 'mask', { original_ref: JSON.stringify({ filename: original.body.name, subfolder: '', type: 'input' }) }),
    );
    leftovers.push(await kept(a.id, bytes));
    const ownerAssets = await stack.db.asset.count({ where: { accountId: owner.id } });
    // The API is alive all along: a full disk is no reason to restart it.
    const alive = (await call(`${api.url}/healthz`)).status;

    await restore();
    const back = await storageCheck(api.url, true);
    const workerBack = await storageCheck(worker.url, true);
    const stored = [(await v2Upload(api.url, a.key, bytes)).status, (await v1Upload(api.url, a.key, testPng(8, 8, 3))).status];

    const notReady = (r: Reply) => r.status === 503 && r.body.status === 'not_ready' && /^error: E(NOSPC|NOTDIR)/.test(r.body.checks.storage);
    report.record({
      tried: `local store on a full disk (${mode === 'tmpfs' ? 'a 1 MiB tmpfs, filled' : 'its temporary folder replaced by a file'}): /readyz of API and worker, uploads on v2, v1 image and mask`,
      count: refusals.length,
      outcome: `readyz ${apiReady.status} (${apiReady.body.checks.storage}), worker ${workerReady.status}; uploads ${refusals.map(describeReply).join(', ')}${mode === 'tmpfs' ? ' (the first filled the disk mid-write)' : ''}; kept ${leftovers.every((l) => JSON.stringify(l) === JSON.stringify(NOTHING)) ? 'nothing' : JSON.stringify(leftovers)}; ready again ${back.status}/${workerBack.status} once there was room, uploads ${stored.join('/')}`,
      held:
        notReady(apiReady) &&
        notReady(workerReady) &&
        refusals.every(refusedAsPromised) &&
        leftovers.every((l) => JSON.stringify(l) === JSON.stringify(NOTHING)) &&
        back.status === 200 &&
        stored.join() === '201,200',
    });

    expect(apiReady.body).toMatchObject({ status: 'not_ready', checks: { postgres: 'ok', redis: 'ok', load: 'ok', storage: expect.stringMatching(/^error: E(NOSPC|NOTDIR)/) } });
    expect(apiReady.status).toBe(503);
    expect(workerReady.status).toBe(503);
    expect(workerReady.body.checks.storage).toMatch(/^error: E(NOSPC|NOTDIR)/);
    expect(refusals.map(describeReply)).toEqual(refusals.map(() => expect.stringMatching(/^503 service_unavailable Retry-After [1-9]\d*$/)));
    expect(refusals.every(refusedAsPromised)).toBe(true);
    expect(leftovers).toEqual(leftovers.map(() => NOTHING));
    expect(ownerAssets).toBe(1);
    expect(alive).toBe(200);
    expect([back.status, workerBack.status]).toEqual([200, 200]);
    expect(stored).toEqual([201, 200]);
  }, 90_000);
});

/** Bytes in use on the file system holding `dir`. */
async function usedBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

describe('S3 store that is down', () => {
  const stack = new TestStack('s3');
  let healthy: RunningProcess;
  let cutOff: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    healthy = (await startCloud(stack, { api: PROBE_INTERVAL })).api;
    // A second replica whose S3 endpoint is a closed port.
    cutOff = await stack.startApi({ S3_ENDPOINT: `http://127.0.0.1:${await freePort()}`, ...PROBE_INTERVAL });
  }, 60_000);
  afterAll(() => stack.close());

  it('is not ready and refuses uploads on v2 and v1 with 503, keeping nothing; the healthy replica stores them', async () => {
    const a = await stack.account();
    expect((await readiness(healthy.url)).status).toBe(200);
    const ready = await readiness(cutOff.url);
    const alive = (await call(`${cutOff.url}/healthz`)).status;
    const bytes = testPng(16, 16, 11);
    const refusals = [await v2Upload(cutOff.url, a.key, bytes), await v1Upload(cutOff.url, a.key, bytes)];
    const leftovers = { blobs: await stack.db.blob.count(), assets: await stack.db.asset.count({ where: { accountId: a.id } }) };
    // The retry the 503 asks for, on a replica whose store answers.
    const retried = (await v2Upload(healthy.url, a.key, bytes)).status;

    report.record({
      tried: 'S3 endpoint down (an API replica pointed at a closed port): /readyz and uploads on v2 and v1',
      count: refusals.length,
      outcome: `readyz ${ready.status} (${String(ready.body.checks?.storage).slice(0, 80)}); uploads ${refusals.map(describeReply).join(', ')}; kept ${leftovers.blobs} blobs, ${leftovers.assets} assets; the retry on a healthy replica ${retried}`,
      held: ready.status === 503 && refusals.every(refusedAsPromised) && leftovers.blobs + leftovers.assets === 0 && retried === 201,
    });
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ status: 'not_ready', checks: { postgres: 'ok', redis: 'ok', load: 'ok', storage: expect.stringMatching(/^error: /) } });
    expect(alive).toBe(200);
    expect(refusals.map(describeReply)).toEqual(refusals.map(() => expect.stringMatching(/^503 service_unavailable Retry-After [1-9]\d*$/)));
    expect(refusals.every(refusedAsPromised)).toBe(true);
    expect(leftovers).toEqual({ blobs: 0, assets: 0 });
    expect(retried).toBe(201);
  }, 60_000);
});
