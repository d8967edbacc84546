import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, readFileSync } from 'node:fs';
import { blake3Hex } from '#libs/storage';
import { encodePng, decodePng } from '#libs/png';
import { ComfyCloud, ComfyCloudError, unwrap, type JobEvent } from '../../clients/typescript/src/index.js';
import { slowJob, startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { TestStack } from '../support/stack.js';
import { ALLOW_LOOPBACK } from '../support/webhooks.js';
import { LossyProxy } from './lossy-proxy.js';

// The typed client against the real stack (API, worker, sim-engine, S3-compatible storage): every
// v2 job and asset operation through its generated `api`, and its helpers, through a proxy that
// loses answers and cuts event streams where a test says so.

const png = (shade: number) => encodePng({ width: 4, height: 4, channels: 3, data: new Uint8Array(48).fill(shade) });

describe('TypeScript client: jobs and assets', () => {
  const stack = new TestStack('s3');
  let cloud: Cloud;
  let proxy: LossyProxy;
  let client: ComfyCloud;
  let key: string;

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack, { api: { ...ALLOW_LOOPBACK, SSE_KEEPALIVE_MS: '300' } });
    proxy = await new LossyProxy(cloud.api.url).start();
    key = (await stack.account()).key;
    client = new ComfyCloud({ baseUrl: proxy.url, apiKey: key });
  }, 60_000);
  afterAll(async () => {
    await proxy?.close();
    await stack.close();
  });

  it('submits, follows the event stream to the end and downloads the output, streamed', async () => {
    const events: JobEvent[] = [];
    // The image is saved after a second on the engine, so the stream is open before the output
    // event: a stream opened after the job ended starts from its final snapshot.
    const workflow = {
      '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 0x336699 } },
      '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms: 1000 } },
      '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'followed' } },
    };
    const job = await client.run({ workflow }, { onEvent: (e) => events.push(e) });
    expect(job.status).toBe('succeeded');
    expect(events.filter((e) => e.event === 'status').map((e) => (e.data as { status: string }).status).at(-1)).toBe('succeeded');
    expect(events.some((e) => e.event === 'output')).toBe(true);
    const [output] = job.outputs;
    const { body, contentType, size } = await client.download(output!);
    const bytes = Buffer.from(await new Response(body).arrayBuffer());
    expect(contentType).toBe('image/png');
    expect(size).toBe(output!.size_bytes);
    expect(`blake3:${blake3Hex(bytes)}`).toBe(output!.hash);
    expect(decodePng(bytes).width).toBe(8);
    // By asset id: the 302 to a fresh signed URL, followed without the key.
    const file = `/tmp/${stack.name}/out.png`;
    mkdirSync(`/tmp/${stack.name}`, { recursive: true });
    expect(await client.downloadTo(output!.id, file)).toBe(bytes.length);
    expect(readFileSync(file).equals(bytes)).toBe(true);
    const signedFetches = proxy.seen.filter((s) => !s.url.startsWith('/api/') && s.headers.authorization);
    expect(signedFetches).toEqual([]);
  });

  it('recovers the job when the answer to its submission is lost: one job, the same id', async () => {
    const before = unwrap(await client.api.GET('/api/v2/jobs', { params: { query: { limit: 100 } } })).data.length;
    proxy.dropNextAnswer('POST', /\/api\/v2\/jobs$/);
    const key = crypto.randomUUID();
    const job = await client.submit({ workflow: tinyImage(1) }, { idempotencyKey: key });
    const sent = proxy.requests('POST', /\/api\/v2\/jobs$/).filter((s) => s.headers['idempotency-key'] === key);
    expect(sent).toHaveLength(2);
    const list = unwrap(await client.api.GET('/api/v2/jobs', { params: { query: { limit: 100 } } })).data;
    expect(list).toHaveLength(before + 1);
    expect(list[0]!.id).toBe(job.id);
    expect((await client.follow(job.id)).status).toBe('succeeded');
  });

  it('resumes a dropped event stream with Last-Event-ID and still sees the job end', async () => {
    // Its image is saved after the sleep, so every event of the run comes after the stream opens.
    const workflow = { ...slowJob(1_500), '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'slow' } } };
    const job = await client.submit({ workflow });
    proxy.cutNextStreamAfter(2);
    const streamPath = new RegExp(`/api/v2/jobs/${job.id}/events$`);
    // Each event with the number of streams opened when it arrived.
    const events: Array<JobEvent & { stream: number }> = [];
    const ended = await client.follow(job.id, { onEvent: (e) => events.push({ ...e, stream: proxy.requests('GET', streamPath).length }) });
    expect(ended.status).toBe('succeeded');
    const streams = proxy.requests('GET', streamPath);
    expect(streams.length).toBeGreaterThanOrEqual(2);
    expect(streams[0]!.headers['last-event-id']).toBeUndefined();
    // The resume names the last event the cut stream delivered, and the job's end came after it.
    const beforeCut = events.filter((e) => e.stream === 1);
    expect(beforeCut.length).toBeGreaterThan(0);
    expect(streams[1]!.headers['last-event-id']).toBe(beforeCut.at(-1)!.id);
    expect(events.filter((e) => e.stream > 1).some((e) => e.event === 'status' && (e.data as { status: string }).status === 'succeeded')).toBe(true);
    expect(events.filter((e) => e.event === 'output')).toHaveLength(1);
  });

  it('falls back to polling when no event stream can be had', async () => {
    proxy.refuseStreams = true;
    try {
      const job = await client.submit({ workflow: slowJob(300) });
      const polls = () => proxy.requests('GET', new RegExp(`/api/v2/jobs/${job.id}$`)).length;
      const ended = await client.follow(job.id, { pollIntervalMs: 100 });
      expect(ended.status).toBe('succeeded');
      expect(polls()).toBeGreaterThanOrEqual(2);
    } finally {
      proxy.refuseStreams = false;
    }
  });

  it('holds the answer with Prefer: wait, takes Cancel-After, cancels, reads the workflow and the logs', async () => {
    const waited = await client.submit({ workflow: tinyImage(2) }, { waitSeconds: 20 });
    expect(waited.status).toBe('succeeded');
    const workflow = unwrap(await client.api.GET('/api/v2/jobs/{id}/workflow', { params: { path: { id: waited.id } } }));
    expect(JSON.stringify(workflow)).toContain('EmptyImage');
    const logs = await client.api.GET('/api/v2/jobs/{id}/logs', { params: { path: { id: waited.id } } });
    expect([200, 204]).toContain(logs.response.status);

    const slow = await client.submit({ workflow: slowJob(10_000) }, { cancelAfter: '60s' });
    expect(slow.deadline_at).not.toBeNull();
    const canceled = unwrap(await client.api.POST('/api/v2/jobs/{id}/cancel', { params: { path: { id: slow.id } } }));
    expect(['canceling', 'canceled']).toContain(canceled.status);
    expect((await client.poll(slow.id, 100)).status).toBe('canceled');
    const listed = unwrap(await client.api.GET('/api/v2/jobs', { params: { query: { status: 'canceled' } } }));
    expect(listed.data.map((j) => j.id)).toContain(slow.id);
  });

  it('answers errors as ComfyCloudError with the envelope\'s code', async () => {
    const missing = await client.job(crypto.randomUUID()).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ComfyCloudError);
    expect(missing).toMatchObject({ status: 404, code: 'not_found' });
    const invalid = await client.submit({ workflow: { '1': { class_type: 'NoSuchNode', inputs: {} } } }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 422, code: 'invalid_workflow' });
    const stranger = new ComfyCloud({ baseUrl: cloud.api.url, apiKey: 'cck_not-a-key' });
    expect(await stranger.job(crypto.randomUUID()).catch((e: unknown) => e)).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('uploads once per blob: HEAD by-hash, then from-hash without sending the bytes again', async () => {
    const bytes = png(200);
    const first = await client.upload(bytes, { filePath: 'in.png', tags: ['client'] });
    expect(first).toMatchObject({ deduplicated: false, asset: { created_new: true, file_path: 'in.png', hash: `blake3:${blake3Hex(bytes)}` } });
    const uploadsBefore = proxy.requests('POST', /\/api\/v2\/assets$/).length;
    const second = await client.upload(new Blob([bytes]), { filePath: 'again.png' });
    expect(second).toMatchObject({ deduplicated: true, asset: { created_new: false, file_path: 'again.png', hash: first.asset.hash } });
    expect(proxy.requests('POST', /\/api\/v2\/assets$/).length).toBe(uploadsBefore);
    expect(proxy.requests('HEAD', /\/api\/v2\/assets\/by-hash\//).length).toBeGreaterThanOrEqual(2);
    // Another account has no use of the blob: its upload sends the bytes.
    const other = new ComfyCloud({ baseUrl: proxy.url, apiKey: (await stack.account()).key });
    expect((await other.upload(bytes, { filePath: 'in.png' })).deduplicated).toBe(false);

    // The asset in a workflow, the record read back, listed, then deleted.
    const job = await client.run({
      workflow: {
        '1': { class_type: 'LoadImage', inputs: { image: { __type: 'core/ASSET', info: { id: second.asset.id } } } },
        '2': { class_type: 'ImageInvert', inputs: { image: ['1', 0] } },
        '3': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'inv' } },
      },
    });
    expect(job.status).toBe('succeeded');
    expect((await client.asset(second.asset.id)).id).toBe(second.asset.id);
    const uploads = unwrap(await client.api.GET('/api/v2/assets', { params: { query: { kind: 'upload' } } }));
    expect(uploads.data.map((a) => a.file_path).sort()).toEqual(['again.png', 'in.png']);
    const removed = await client.api.DELETE('/api/v2/assets/{id}', { params: { path: { id: first.asset.id } } });
    expect(removed.response.status).toBe(204);
  });

  it('recovers an upload whose answer was lost (422 idempotency_key_reuse names the asset)', async () => {
    proxy.dropNextAnswer('POST', /\/api\/v2\/assets$/);
    const { asset, deduplicated } = await client.upload(png(7), { filePath: 'lost.png' });
    expect(deduplicated).toBe(false);
    const [lost, retry] = proxy.requests('POST', /\/api\/v2\/assets$/).slice(-2).map((s) => s.headers['idempotency-key']);
    expect(retry).toBe(lost);
    const listed = unwrap(await client.api.GET('/api/v2/assets', { params: { query: { kind: 'upload' } } })).data.filter((a) => a.file_path === 'lost.png');
    expect(listed.map((a) => a.id)).toEqual([asset.id]);
  });

  it('imports from a URL and uploads resumably (tus) through the generated client', async () => {
    const bytes = png(99);
    const server: Server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(bytes));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/remote.png`;
      const imported = unwrap(await client.api.POST('/api/v2/assets/from-url', { body: { url, file_path: 'remote.png' }, headers: { 'idempotency-key': crypto.randomUUID() } }));
      expect(imported).toMatchObject({ file_path: 'remote.png', hash: `blake3:${blake3Hex(bytes)}` });
    } finally {
      server.close();
    }

    const meta = `file_path ${Buffer.from('models/loras/tiny.safetensors').toString('base64')}`;
    // The tus headers are the document's required header parameters.
    const tus = { 'Tus-Resumable': '1.0.0' } as const;
    const created = await client.api.POST('/api/v2/uploads', { params: { header: { ...tus, 'Upload-Length': String(bytes.length), 'Upload-Metadata': meta } } });
    expect(created.response.status).toBe(201);
    const id = created.response.headers.get('location')!.split('/').pop()!;
    const half = bytes.length >> 1;
    const patch = (offset: number, chunk: Uint8Array) =>
      client.api.PATCH('/api/v2/uploads/{id}', {
        params: { path: { id }, header: { ...tus, 'Upload-Offset': String(offset) } },
        headers: { 'content-type': 'application/offset+octet-stream' },
        body: chunk as never,
        bodySerializer: () => chunk,
      });
    expect((await patch(0, bytes.subarray(0, half))).response.status).toBe(204);
    const offset = await client.api.HEAD('/api/v2/uploads/{id}', { params: { path: { id }, header: tus } });
    expect(offset.response.headers.get('upload-offset')).toBe(String(half));
    const done = await patch(half, bytes.subarray(half));
    expect(done.response.status).toBe(200);
    expect(done.data).toMatchObject({ file_path: 'models/loras/tiny.safetensors', size_bytes: bytes.length });

    const abandoned = await client.api.POST('/api/v2/uploads', { params: { header: { ...tus, 'Upload-Length': '10', 'Upload-Metadata': meta } } });
    const abandonedId = abandoned.response.headers.get('location')!.split('/').pop()!;
    expect((await client.api.DELETE('/api/v2/uploads/{id}', { params: { path: { id: abandonedId }, header: tus } })).response.status).toBe(204);
  });

  it('reads the account and the user folder', async () => {
    const account = unwrap(await client.api.GET('/api/v2/account'));
    expect(account.credit_balance).toBeLessThan(1_000_000);
    expect(account.charges.data.some((c) => c.reason === 'job')).toBe(true);
    // The engine's user-folder listing is a v1 route: its credential is X-API-Key.
    const folder = await client.api.GET('/api/v2/userdata', { params: { query: { path: '.' } }, headers: { 'x-api-key': key } });
    expect(folder.response.status).toBe(200);
    expect(folder.data).toEqual([]); // nothing saved yet
  });
});
