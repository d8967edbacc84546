import { request } from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import WebSocket from 'ws';
import { blake3Hex } from '#libs/storage';
import { slowJob, startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit, uploadForm } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { headerList, rawCall, type RawReply } from '../support/raw-http.js';
import { TestStack } from '../support/stack.js';

function decoded(reply: RawReply): Buffer {
  const encoding = reply.headers['content-encoding'];
  if (encoding === 'gzip') return gunzipSync(reply.bytes);
  if (encoding === 'br') return brotliDecompressSync(reply.bytes);
  if (encoding === undefined) return reply.bytes;
  throw new Error(`unexpected content-encoding ${encoding}`);
}

function expectUnencoded(reply: RawReply): void {
  expect(reply.headers['content-encoding']).toBeUndefined();
  expect(Number(reply.headers['content-length'])).toBe(reply.bytes.length);
}

interface TimedFrame {
  at: number;
  text: string;
}

/** Reads an event stream over node:http, noting when each chunk arrived. */
function readStream(url: string, headers: Record<string, string>): Promise<{ headers: Record<string, unknown>; chunks: TimedFrame[] }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: TimedFrame[] = [];
      res.on('data', (c: Buffer) => chunks.push({ at: performance.now(), text: c.toString('latin1') }));
      res.on('end', () => resolve({ headers: res.headers, chunks }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('compression', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let api: string;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack);
    api = cloud.api.url;
    alice = await stack.account({ name: 'alice' });
    // Node definitions reach the API once the worker has published its engine's.
    await waitUntil(async () => (await call(`${api}/api/object_info`, { headers: { 'x-api-key': alice.key } })).status === 200, 20_000, 'object_info');
  });
  afterAll(() => stack.close());

  const objectInfo = (acceptEncoding?: string) =>
    rawCall(`${api}/api/object_info`, { headers: { 'x-api-key': alice.key, ...(acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding }) } });

  it('encodes object_info with brotli or gzip as the client accepts, and sends it as it is otherwise', async () => {
    const plain = await objectInfo();
    expect(plain.status).toBe(200);
    expectUnencoded(plain);
    const definitions = JSON.parse(plain.bytes.toString('utf8')) as Record<string, unknown>;
    expect(Object.keys(definitions)).toContain('KSampler');

    for (const [accepted, expected] of [
      ['gzip', 'gzip'],
      ['br', 'br'],
      ['gzip, deflate, br', 'br'],
      ['gzip, br;q=0.5', 'gzip'],
      ['br;q=0, gzip', 'gzip'],
    ] as const) {
      const reply = await objectInfo(accepted);
      expect([accepted, reply.headers['content-encoding']]).toEqual([accepted, expected]);
      expect(headerList(reply.headers, 'vary')).toContain('accept-encoding');
      // A large answer is encoded as a stream, so its length goes unannounced; never a wrong one.
      if (reply.headers['content-length'] !== undefined) expect(Number(reply.headers['content-length'])).toBe(reply.bytes.length);
      else expect(reply.headers['transfer-encoding']).toBe('chunked');
      expect(reply.bytes.length).toBeLessThan(plain.bytes.length / 4);
      expect(decoded(reply).equals(plain.bytes)).toBe(true);
    }
    for (const refused of ['identity', 'deflate', 'zstd', 'gzip;q=0, br;q=0']) expectUnencoded(await objectInfo(refused));
  });

  it('leaves answers under 1 KiB as they are, and encodes text and the OpenAPI document', async () => {
    const small = await rawCall(`${api}/api/features`, { headers: { 'x-api-key': alice.key, 'accept-encoding': 'gzip, br' } });
    expect(small.status).toBe(200);
    expect(small.bytes.length).toBeLessThan(1024);
    expectUnencoded(small);

    const metrics = await rawCall(`${api}/metrics`, { headers: { 'accept-encoding': 'gzip' } });
    expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
    expect(metrics.headers['content-encoding']).toBe('gzip');
    expect(decoded(metrics).toString()).toContain('# TYPE');

    const document = await rawCall(`${api}/openapi.json`, { headers: { 'accept-encoding': 'br' } });
    expect(document.headers['content-encoding']).toBe('br');
    expect(JSON.parse(decoded(document).toString()).openapi).toMatch(/^3\.1/);
  });

  it('never encodes an event stream, and each event leaves when it happens', async () => {
    const submitted = await call(`${api}/api/v2/jobs`, jsonInit('POST', { workflow: slowJob(1500) }, bearer(alice.key)));
    expect(submitted.status).toBe(201);
    const started = performance.now();
    const stream = await readStream(`${api}${submitted.body.urls.events}`, { authorization: `Bearer ${alice.key}`, 'accept-encoding': 'gzip, deflate, br' });
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(stream.headers['content-encoding']).toBeUndefined();
    const text = stream.chunks.map((c) => c.text).join('');
    expect(text).toMatch(/^(: .*\n\n)?(id|event|data): /m);
    expect(text).toContain('"status":"succeeded"');
    // The job ran 1.5 s on the engine: the events before it ended (its status at least) were
    // delivered then, not held back for the end of the stream, as an encoder would.
    const ended = stream.chunks.findIndex((c) => c.text.includes('"status":"succeeded"'));
    const first = stream.chunks[0]!;
    expect(ended).toBeGreaterThan(0);
    expect(stream.chunks[ended]!.at - first.at).toBeGreaterThan(1000);
    expect(first.at - started).toBeLessThan(1000);
  });

  it('never encodes stored bytes: a text asset and an image through their signed URLs, whole or in part', async () => {
    const text = Buffer.from('the same line of text, over and over\n'.repeat(400));
    const upload = await call(`${api}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: uploadForm(text, 'notes.txt') });
    expect([201, 200]).toContain(upload.status);
    const content = await rawCall(`${api}/api/v2/assets/${upload.body.id}/content`, { headers: bearer(alice.key) });
    expect(content.status).toBe(302);
    const signed = new URL(String(content.headers.location), api).toString();
    const whole = await rawCall(signed, { headers: { 'accept-encoding': 'gzip, br' } });
    expect(whole.status).toBe(200);
    expect(whole.headers['content-type']).toMatch(/^text\/plain/);
    expectUnencoded(whole);
    expect(whole.bytes.equals(text)).toBe(true);
    expect(whole.headers.etag).toBe(`"${blake3Hex(text)}"`);
    const part = await rawCall(signed, { headers: { 'accept-encoding': 'gzip, br', range: 'bytes=100-1099' } });
    expect(part.status).toBe(206);
    expectUnencoded(part);
    expect(part.bytes.equals(text.subarray(100, 1100))).toBe(true);

    // The self-hosted surface serves the bytes itself, from the same route.
    const selfHosted = await stack.startApi({ SURFACE: 'self-hosted', API_PORT: '0' });
    const local = await call(`${selfHosted.url}/api/v2/assets`, { method: 'POST', body: uploadForm(text, 'notes.txt') });
    const served = await rawCall(`${selfHosted.url}/api/v2/assets/${local.body.id}/content`, { headers: { 'accept-encoding': 'gzip, br' } });
    expect(served.status).toBe(200);
    expect(served.headers['content-type']).toMatch(/^text\/plain/);
    expectUnencoded(served);
    expect(served.bytes.equals(text)).toBe(true);

    const job = await call(`${api}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(7) }, bearer(alice.key, { prefer: 'wait=20' })));
    expect(job.body.status).toBe('succeeded');
    const image = await rawCall(job.body.outputs[0].url, { headers: { 'accept-encoding': 'gzip, br' } });
    expect(image.headers['content-type']).toBe('image/png');
    expectUnencoded(image);
  });

  it('never compresses the WebSocket', async () => {
    const ws = new WebSocket(`${api.replace('http', 'ws')}/ws?clientId=compression&token=${alice.key}`, { perMessageDeflate: true });
    const first = await new Promise<string>((resolve, reject) => {
      ws.once('message', (data) => resolve(data.toString()));
      ws.once('error', reject);
    });
    expect(JSON.parse(first).type).toBe('status');
    // The client offered permessage-deflate; the server took none.
    expect(ws.extensions).toBe('');
    ws.close();
  });
});
