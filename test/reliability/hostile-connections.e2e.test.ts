import { randomBytes } from 'node:crypto';
import net from 'node:net';
import fc from 'fast-check';
import WebSocket from 'ws';
import { mintRouterToken } from '#libs/auth';
import { signBlobUrl } from '#libs/storage';
import { slowJob, startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { waitUntil } from '../support/jobs.js';
import { ReliabilityReport } from '../support/reliability.js';
import { TEST_ROUTER_SECRET, TEST_SIGNING_SECRET, TestStack } from '../support/stack.js';
import { MAX_MS, cases, errorLines, fuzz, notEnvelope, notRouterError, parseRawResponse, rawExchange, send, type Answer } from './hostile-support.js';

/**
 * Abuse at the connection level: header injection, tampered and replayed signed URLs, bodies over
 * the limits, clients that send slowly or never finish, and WebSocket floods and bad frames. The
 * API runs with short deadlines and small limits so each can be provoked in a test's time.
 */
const report = new ReliabilityReport('Hostile connections', 4);
const record = report.record.bind(report);

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 2_000;
const CHECK_MS = 100;
const MAX_JSON = 64 * 1024;
const MAX_UPLOAD = 256 * 1024;
const URL_TTL_SECONDS = 4;

const stack = new TestStack('local');
let cloud: Cloud;
let api: string;
let port: number;
let alice: { id: string; key: string };
let routerToken: string;
let blob: { hash: string; otherHash: string };
let apiLogFrom = 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  await stack.open();
  cloud = await startCloud(stack, {
    workers: 1,
    api: {
      AUTH_FAILURE_LIMIT: '0',
      HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      HTTP_TIMEOUT_CHECK_MS: String(CHECK_MS),
      MAX_JSON_BODY_BYTES: String(MAX_JSON),
      MAX_UPLOAD_BYTES: String(MAX_UPLOAD),
      SIGNED_URL_TTL_SECONDS: String(URL_TTL_SECONDS),
    },
  });
  api = cloud.api.url;
  port = cloud.api.port;
  alice = await stack.account({ name: 'alice' });
  await stack.accounts.setLimits(alice.id, { requestsPerMinute: 1_000_000, maxEventStreams: 50, routerEnabled: true, routerSpendCapCents: 0 });
  routerToken = await mintRouterToken(TEST_ROUTER_SECRET, alice.id);
  const hashes: string[] = [];
  for (const text of ['first blob', 'second blob']) {
    const up = await upload('/api/v2/assets', { authorization: `Bearer ${alice.key}` }, 'file', Buffer.from(text));
    expect(up.status).toBe(201);
    hashes.push(String(up.body.hash).slice(7));
  }
  blob = { hash: hashes[0]!, otherHash: hashes[1]! };
  apiLogFrom = cloud.api.output.length;
}, 60_000);

afterAll(async () => {
  report.save();
  await stack.close();
});

const BOUNDARY = 'hxconn0d15ea5e';
function upload(path: string, headers: Record<string, string>, field: string, bytes: Buffer, extra: Record<string, string> = {}): Promise<Answer> {
  const parts = Object.entries(extra).map(([k, v]) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
  const body = Buffer.concat([
    Buffer.from(`${parts.join('')}--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"; filename="big.png"\r\nContent-Type: image/png\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
  return send(`${api}${path}`, { method: 'POST', headers: { ...headers, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body });
}

const healthy = async () => (await send(`${api}/readyz`)).status === 200;

describe('header injection', () => {
  it('refuses malformed HTTP (CR, NUL, folded or invalid header lines, smuggling) with a 400 envelope and closes the connection', async () => {
    const get = (headerLines: string) => `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n${headerLines}\r\n\r\n`;
    const malformed: Array<[string, string]> = [
      ['bare CR in a value', get('X-Request-Id: abc\rSet-Cookie: owned=1')],
      ['NUL in a value', get('X-Request-Id: a\u0000b')],
      ['folded header line', get('X-Request-Id: a\r\n Set-Cookie: owned=1')],
      ['space in a header name', get('Bad Header: x')],
      ['non-ASCII header name', get('Idempotency-Kéy: x')],
      ['CR inside Idempotency-Key', `POST /api/v2/jobs HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\rX-Injected: 1\r\nContent-Length: 0\r\n\r\n`],
      ['not HTTP at all', 'HELLO THERE\r\n\r\n'],
      ['Content-Length and Transfer-Encoding together', `POST /api/v2/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
      ['two different Content-Lengths', `POST /api/v2/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcd`],
      ['a bad chunk size', `POST /api/prompt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n`],
      ['headers over 16 KiB', get(`X-Big: ${'a'.repeat(20_000)}`)],
    ];
    await cases(
      record,
      'malformed HTTP: CR/NUL in values, folded lines, bad names, smuggling (CL+TE), bad chunks, 20 KiB headers',
      malformed,
      async ([, raw]) => {
        const r = await rawExchange(port, [raw], { giveUpMs: MAX_MS });
        const parsed = parseRawResponse(r.text);
        return { status: parsed.status, ms: r.ms, headers: { 'content-type': /content-type: ([^\r\n]*)/i.exec(parsed.head)?.[1], closed: String(r.closedByServer) }, text: r.text, body: parsed.body };
      },
      (a) => {
        if (![400, 431].includes(a.status)) return `status ${a.status}: ${a.text.slice(0, 200)}`;
        if (a.headers.closed !== 'true') return 'the connection stayed open';
        if (/set-cookie|x-injected/i.test(a.text)) return 'an injected header came back';
        return notEnvelope(a);
      },
    );
    expect(await healthy()).toBe(true);
  });

  it('never echoes a header value it did not validate (request ids, Idempotency-Key)', async () => {
    const values = ['abc%0d%0aSet-Cookie: x=1', 'a b', '"><script>', 'x'.repeat(65), 'ok.id-42'];
    await cases(
      record,
      'X-Request-Id and Idempotency-Key values that are not plain tokens',
      values,
      (v) => send(`${api}/api/v2/jobs`, { method: 'POST', headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', 'x-request-id': v, 'idempotency-key': v }, body: '{"workflow":{}}' }),
      (a, v) => {
        const id = String(a.headers['x-request-id']);
        const echoed = id === v;
        if (echoed !== (v === 'ok.id-42')) return `x-request-id ${JSON.stringify(id)} for ${JSON.stringify(v)}`;
        if (Object.values(a.headers).some((h) => String(h).includes('Set-Cookie') || String(h).includes('<script>'))) return 'reflected';
        return a.status >= 400 && a.status < 500 ? notEnvelope(a) : `status ${a.status}`;
      },
    );
  });

  it('serves file names and media types only in safe header forms (Content-Disposition, Content-Type)', async () => {
    const names = ['a\r\nSet-Cookie: owned=1.png', 'x"; filename="evil.exe', 'semi;colon=1.png', 'back\\slash.png', 'nul\u0000.png', 'émoji 😀.png', 'x'.repeat(2000), '"', ''];
    const types = ['image/png', 'text/plain\r\nX-Evil: 1', 'text/html', 'image/svg+xml', 'a\u0000b/c', '', 'image/png; charset="x\r\ny"'];
    const probes = [...names.map((n) => ({ name: n, ct: 'image/png' })), ...types.map((t) => ({ name: 'f.png', ct: t }))];
    await cases(
      record,
      'signed blob URLs (validly signed) carrying CR/LF, quotes, NUL, non-ASCII in the file name or media type',
      probes,
      (p) => send(`${api}/blobs/${blob.hash}?${signBlobUrl(TEST_SIGNING_SECRET, { hash: blob.hash, expiresAt: Math.floor(Date.now() / 1000) + 600, fileName: p.name, contentType: p.ct })}`),
      (a) => {
        if (a.status !== 200) return `status ${a.status}: ${a.text.slice(0, 200)}`;
        const disposition = String(a.headers['content-disposition']);
        if (!/^inline; filename="[\x20\x21\x23-\x5b\x5d-\x7e]*"; filename\*=UTF-8''[A-Za-z0-9%!'()*._~-]*$/.test(disposition)) return `content-disposition ${JSON.stringify(disposition)}`;
        if (!/^[a-z0-9.+-]+\/[a-z0-9.+-]+(; charset="x")?$/i.test(String(a.headers['content-type']))) return `content-type ${JSON.stringify(a.headers['content-type'])}`;
        if (a.headers['set-cookie'] || a.headers['x-evil']) return 'an injected header came back';
        if (!/sandbox/.test(String(a.headers['content-security-policy'])) || a.headers['x-content-type-options'] !== 'nosniff') return 'served without sandbox and nosniff';
        return null;
      },
    );
  });
});

describe('signed URLs', () => {
  const valid = () => new URL(`${api}/blobs/${blob.hash}?${signBlobUrl(TEST_SIGNING_SECRET, { hash: blob.hash, expiresAt: Math.floor(Date.now() / 1000) + 600, fileName: 'f.png', contentType: 'image/png' })}`);

  it('refuses every tampered signed URL with 403 (or 404 for a path that is no hash)', async () => {
    expect((await send(valid().toString())).status).toBe(200);
    // A name with a comma, split in two: the repeated parameter must not pass for the signed "a,b.png".
    const comma = new URL(`${api}/blobs/${blob.hash}?${signBlobUrl(TEST_SIGNING_SECRET, { hash: blob.hash, expiresAt: Math.floor(Date.now() / 1000) + 600, fileName: 'a,b.png', contentType: 'image/png' })}`);
    expect((await send(comma.toString())).status).toBe(200);
    comma.search = comma.search.replace('name=a%2Cb.png', 'name=a&name=b.png');
    const split = await send(comma.toString());
    expect([split.status, notEnvelope(split)]).toEqual([403, null]);
    const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const tamper = fc.oneof(
      fc.record({ kind: fc.constant('flip signature' as const), at: fc.nat(), to: fc.constantFrom(...B64) }),
      fc.record({ kind: fc.constant('move expiry' as const), by: fc.integer({ min: -1_000_000, max: 1_000_000 }).filter((n) => n !== 0) }),
      fc.record({ kind: fc.constant('rename' as const), name: fc.string({ maxLength: 30 }).filter((n) => n !== 'f.png') }),
      fc.record({ kind: fc.constant('change media type' as const), ct: fc.constantFrom('text/html', 'image/svg+xml', 'application/octet-stream', 'image/png ', 'IMAGE/PNG') }),
      fc.record({ kind: fc.constant('point at another blob' as const) }),
      fc.record({ kind: fc.constant('flip a hash digit' as const), at: fc.integer({ min: 0, max: 63 }), to: fc.constantFrom(...'0123456789abcdefg') }),
      fc.record({ kind: fc.constant('drop a parameter' as const), param: fc.constantFrom('exp', 'name', 'ct', 'sig') }),
      fc.record({ kind: fc.constant('repeat a parameter' as const), param: fc.constantFrom('exp', 'name', 'ct', 'sig'), value: fc.string({ maxLength: 10 }) }),
      fc.record({ kind: fc.constant('shorten the signature' as const), by: fc.integer({ min: 1, max: 40 }) }),
    );
    await fuzz(
      record,
      'tampered signed URLs: signature, expiry, name, media type, hash, dropped and repeated parameters (fast-check)',
      tamper,
      (t) => {
        const url = valid();
        const q = url.searchParams;
        const sig = q.get('sig')!;
        switch (t.kind) {
          case 'flip signature': {
            const at = t.at % sig.length;
            q.set('sig', sig.slice(0, at) + (t.to === sig[at] ? (t.to === 'A' ? 'B' : 'A') : t.to) + sig.slice(at + 1));
            break;
          }
          case 'move expiry':
            q.set('exp', String(Number(q.get('exp')) + t.by));
            break;
          case 'rename':
            q.set('name', t.name);
            break;
          case 'change media type':
            q.set('ct', t.ct);
            break;
          case 'point at another blob':
            url.pathname = `/blobs/${blob.otherHash}`;
            break;
          case 'flip a hash digit': {
            const to = t.to === blob.hash[t.at] ? (t.to === '0' ? '1' : '0') : t.to;
            url.pathname = `/blobs/${blob.hash.slice(0, t.at)}${to}${blob.hash.slice(t.at + 1)}`;
            break;
          }
          case 'drop a parameter':
            q.delete(t.param);
            break;
          case 'repeat a parameter':
            q.append(t.param, t.value);
            break;
          case 'shorten the signature':
            q.set('sig', sig.slice(0, Math.max(0, sig.length - t.by)));
            break;
        }
        return send(url.toString());
      },
      (a) => ([403, 404].includes(a.status) ? notEnvelope(a) : `status ${a.status}`),
      150,
    );
  });

  it('refuses a real signed URL replayed after it expired, with 403 in the envelope', async () => {
    const asset = (await send(`${api}/api/v2/assets`, { method: 'POST', headers: { authorization: `Bearer ${alice.key}`, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="r.png"\r\n\r\nreplay me\r\n--${BOUNDARY}--\r\n` })).body;
    const urls = [String(asset.url), String((await send(`${api}/api/v2/assets/${asset.id}/content`, { headers: { authorization: `Bearer ${alice.key}` } })).headers.location)];
    const fresh = await Promise.all(urls.map((u) => send(u)));
    const expiry = Math.max(...urls.map((u) => Number(new URL(u).searchParams.get('exp'))));
    // Wait past the expiry the URLs carry (their lifetime is SIGNED_URL_TTL_SECONDS).
    while (Date.now() / 1000 <= expiry + 1) await sleep(200);
    const replayed = await Promise.all(urls.map((u) => send(u)));
    const held = fresh.every((a) => a.status === 200) && replayed.every((a) => a.status === 403 && /expired/.test(String(a.body?.error?.message)));
    record({ tried: `real signed URLs (asset url, /content redirect) replayed after their ${URL_TTL_SECONDS} s lifetime`, count: urls.length * 2, outcome: `fresh: ${fresh.map((a) => a.status).join(', ')}; replayed: ${replayed.map((a) => `${a.status} ${a.body?.error?.code}`).join(', ')}`, held });
    expect(fresh.map((a) => a.status)).toEqual([200, 200]);
    for (const a of replayed) {
      expect(a.status).toBe(403);
      expect(notEnvelope(a)).toBeNull();
      expect(a.body.error.message).toMatch(/expired/);
    }
  });
});

describe('oversized bodies', () => {
  it('answers JSON bodies over the limit with 413 in the surface\'s shape, whether declared, chunked or lied about', async () => {
    const big = JSON.stringify({ workflow: { '1': { class_type: 'SaveImage', inputs: { filename_prefix: 'x'.repeat(MAX_JSON) } } } });
    const v2 = { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' };
    const v1 = { 'x-api-key': alice.key, 'content-type': 'text/plain;charset=UTF-8' };
    const router = { authorization: `Bearer ${routerToken}`, 'content-type': 'application/json' };
    const probes: Array<{ what: string; path: string; headers: Record<string, string>; chunked?: boolean; declared?: number; router?: boolean }> = [
      { what: 'v2 submit', path: '/api/v2/jobs', headers: v2 },
      { what: 'v2 submit, chunked', path: '/api/v2/jobs', headers: v2, chunked: true },
      { what: 'v2 submit, declaring 10 GB', path: '/api/v2/jobs', headers: v2, declared: 10 * 2 ** 30 },
      { what: 'v2 from-hash', path: '/api/v2/assets/from-hash', headers: v2 },
      { what: 'v1 prompt', path: '/api/prompt', headers: v1 },
      { what: 'v1 prompt, chunked', path: '/api/prompt', headers: v1, chunked: true },
      { what: 'v1 queue', path: '/api/queue', headers: v1 },
      { what: 'router call', path: '/v1/models/openai/gpt-image-1', headers: router, router: true },
      { what: 'router call, chunked', path: '/v1/models/openai/gpt-image-1', headers: router, router: true, chunked: true },
    ];
    await cases(
      record,
      `JSON bodies over MAX_JSON_BODY_BYTES (${MAX_JSON / 1024} KiB) on v2, v1 and the router: sized, chunked, and declaring 10 GB`,
      probes,
      async (p) => {
        if (p.declared) {
          // Only the headers are sent: the answer must not wait for 10 GB that never come.
          const started = Date.now();
          const r = await rawExchange(port, [`POST ${p.path} HTTP/1.1\r\nHost: x\r\n${Object.entries(p.headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\nContent-Length: ${p.declared}\r\n\r\n{"a":`], { giveUpMs: MAX_MS });
          const parsed = parseRawResponse(r.text);
          return { status: parsed.status, ms: Date.now() - started, headers: { 'content-type': /content-type: ([^\r\n]*)/i.exec(parsed.head)?.[1] }, text: r.text, body: parsed.body };
        }
        const headers = p.chunked ? { ...p.headers, 'transfer-encoding': 'chunked' } : p.headers;
        return send(`${api}${p.path}`, { method: 'POST', headers, body: p.path === '/api/prompt' ? JSON.stringify({ prompt: JSON.parse(big).workflow }) : big });
      },
      (a, p) => (a.status === 413 ? (p.router ? notRouterError(a) : notEnvelope(a)) : `status ${a.status}: ${a.text.slice(0, 200)}`),
    );
    // Just under the limit is read and judged on its content.
    const under = await send(`${api}/api/v2/jobs`, { method: 'POST', headers: v2, body: JSON.stringify({ workflow: { '1': { class_type: 'SaveImage', inputs: { filename_prefix: 'x'.repeat(MAX_JSON - 200) } } } }) });
    expect(under.status).toBe(422);
  });

  it('answers uploads over the limit with 413 and stores nothing', async () => {
    const before = await stack.db.asset.count();
    const tooBig = randomBytes(MAX_UPLOAD + 1024);
    const probes: Array<{ what: string; go: () => Promise<Answer> }> = [
      { what: 'v2 upload', go: () => upload('/api/v2/assets', { authorization: `Bearer ${alice.key}` }, 'file', tooBig) },
      { what: 'v1 image', go: () => upload('/api/upload/image', { 'x-api-key': alice.key }, 'image', tooBig) },
      { what: 'v1 mask', go: () => upload('/api/upload/mask', { 'x-api-key': alice.key }, 'image', tooBig, { original_ref: '{"filename":"x.png"}' }) },
      { what: 'v2 upload, 100 KiB text field', go: () => upload('/api/v2/assets', { authorization: `Bearer ${alice.key}` }, 'file', Buffer.from('small'), { file_path: 'x'.repeat(100 * 1024) }) },
      { what: 'v2 upload, 150 fields', go: () => upload('/api/v2/assets', { authorization: `Bearer ${alice.key}` }, 'file', Buffer.from('small'), Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`f${i}`, 'v']))) },
    ];
    await cases(record, `uploads over MAX_UPLOAD_BYTES (${MAX_UPLOAD / 1024} KiB), text fields over 64 KiB, 150 fields (v2 and v1)`, probes, (p) => p.go(), (a) => (a.status === 413 ? notEnvelope(a) : `status ${a.status}: ${a.text.slice(0, 200)}`));
    expect(await stack.db.asset.count()).toBe(before);
  });
});

describe('slow clients', () => {
  const headers = `GET /api/v2/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer `;

  it('cuts off clients that send nothing, or their headers or body byte by byte, with 408', async () => {
    const body = JSON.stringify({ workflow: tinyImage() });
    const post = `POST /api/v2/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const mp = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\n${'z'.repeat(200)}\r\n--${BOUNDARY}--\r\n`;
    const upload = `POST /api/v2/assets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.key}\r\nContent-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: ${mp.length}\r\n\r\n`;
    const slow: Array<[string, Array<string>, number]> = [
      ['a connection that sends nothing', [], HEADERS_TIMEOUT_MS],
      ['headers one byte every 50 ms', [...`${headers}${alice.key}\r\n\r\n`], HEADERS_TIMEOUT_MS],
      ['a JSON body one byte every 50 ms', [post, ...body], REQUEST_TIMEOUT_MS],
      ['an upload one byte every 50 ms', [upload, ...mp], REQUEST_TIMEOUT_MS],
    ];
    // All at once: each waits out its own deadline.
    const exchanges = new Map(slow.map(([what, chunks]) => [what, rawExchange(port, chunks, { gapMs: 50, giveUpMs: REQUEST_TIMEOUT_MS + MAX_MS })]));
    await cases(
      record,
      `slow senders (headers deadline ${HEADERS_TIMEOUT_MS} ms, request deadline ${REQUEST_TIMEOUT_MS} ms)`,
      slow,
      async ([what]) => {
        const r = await exchanges.get(what)!;
        const parsed = parseRawResponse(r.text);
        return { status: parsed.status, ms: r.ms, headers: { 'content-type': /content-type: ([^\r\n]*)/i.exec(parsed.head)?.[1], closed: String(r.closedByServer) }, text: r.text, body: parsed.body };
      },
      (a, [, , deadline]) => {
        if (a.status !== 408) return `status ${a.status} after ${a.ms} ms: ${a.text.slice(0, 120)}`;
        if (a.headers.closed !== 'true') return 'not closed by the server';
        if (a.ms < deadline - 100) return `cut off early, after ${a.ms} ms`;
        return notEnvelope(a);
      },
    );
  });

  it('keeps answering other clients while 40 slow clients hold connections', async () => {
    const slowOnes = Array.from({ length: 40 }, () => rawExchange(port, [...`${headers}${alice.key}\r\n\r\n`], { gapMs: 100, giveUpMs: HEADERS_TIMEOUT_MS + MAX_MS }));
    const times: number[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const a = await send(`${api}/api/v2/jobs?limit=1`, { headers: { authorization: `Bearer ${alice.key}` } });
      times.push(a.ms);
      statuses.push(a.status);
      await sleep(25);
    }
    const cut = await Promise.all(slowOnes);
    const closed = cut.filter((c) => c.closedByServer && c.text.startsWith('HTTP/1.1 408')).length;
    const held = statuses.every((s) => s === 200) && Math.max(...times) < MAX_MS && closed === cut.length;
    record({ tried: '40 slowloris connections (headers at 10 bytes/s) while another client makes 20 requests', count: 60, outcome: `other client: ${statuses.filter((s) => s === 200).length}/20 answered, slowest ${Math.max(...times)} ms; slow ones closed with 408: ${closed}/40`, held });
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(Math.max(...times)).toBeLessThan(MAX_MS);
    expect(closed).toBe(cut.length);
  });

  it('does not cut off a slow response: a request already received may wait longer than the request deadline', async () => {
    const a = await send(`${api}/api/v2/jobs`, { method: 'POST', headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', prefer: 'wait=20' }, body: JSON.stringify({ workflow: slowJob(REQUEST_TIMEOUT_MS + 1_000) }), timeoutMs: 30_000 });
    const held = a.status === 201 && a.body.status === 'succeeded' && a.ms > REQUEST_TIMEOUT_MS;
    record({ tried: `Prefer: wait on a job that runs ${REQUEST_TIMEOUT_MS + 1_000} ms (longer than the ${REQUEST_TIMEOUT_MS} ms request deadline)`, count: 1, outcome: `${a.status} ${a.body?.status} after ${a.ms} ms`, held });
    expect(a.status).toBe(201);
    expect(a.body.status).toBe('succeeded');
    expect(a.ms).toBeGreaterThan(REQUEST_TIMEOUT_MS);
  });
});

/** An open v1 socket of `key` and the messages it has received. */
async function openSocket(key: string): Promise<{ ws: WebSocket; texts: Array<{ type: string; data: any }>; closed: Promise<{ code: number; reason: string }> }> {
  const ws = new WebSocket(`${api.replace('http', 'ws')}/ws?clientId=c${randomBytes(4).toString('hex')}&token=${key}`);
  const texts: Array<{ type: string; data: any }> = [];
  ws.on('message', (data, binary) => {
    if (!binary) texts.push(JSON.parse(data.toString()) as { type: string; data: any });
  });
  ws.on('error', () => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => {
      ws.terminate();
      reject(new Error(`upgrade answered ${res.statusCode}`));
    });
  });
  await waitUntil(() => texts.some((m) => m.type === 'status'), 5_000, 'the greeting');
  return { ws, texts, closed };
}

/** Upgrades a raw TCP connection to /ws, writes `frame`, and returns the close code the server sends. */
function rawSocketCloseCode(key: string, frame: Buffer): Promise<{ code: number | null; ms: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let buffer = Buffer.alloc(0);
    let upgraded = false;
    const done = (code: number | null) => {
      socket.destroy();
      resolve({ code, ms: Date.now() - started });
    };
    const timer = setTimeout(() => done(null), MAX_MS);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ code: null, ms: Date.now() - started });
    });
    socket.on('data', (d: Buffer) => {
      buffer = Buffer.concat([buffer, d]);
      if (!upgraded) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        upgraded = buffer.subarray(0, 12).toString() === 'HTTP/1.1 101';
        buffer = buffer.subarray(end + 4);
        if (!upgraded) return done(-1);
        socket.write(frame);
      }
      // Server frames are unmasked; skip the greeting and find the close frame (opcode 8).
      let at = 0;
      while (at + 2 <= buffer.length) {
        const opcode = buffer[at]! & 0x0f;
        let len = buffer[at + 1]! & 0x7f;
        let head = 2;
        if (len === 126) {
          len = buffer.readUInt16BE(at + 2);
          head = 4;
        }
        if (at + head + len > buffer.length) return;
        if (opcode === 8) {
          clearTimeout(timer);
          return done(len >= 2 ? buffer.readUInt16BE(at + head) : 1005);
        }
        at += head + len;
      }
    });
    socket.write(
      `GET /ws?clientId=raw&token=${key} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
    );
  });
}

function clientFrame(first: number, payload: Buffer, masked = true): Buffer {
  const mask = randomBytes(4);
  const len = payload.length;
  const head = len < 126 ? Buffer.from([first, (masked ? 0x80 : 0) | len]) : Buffer.from([first, (masked ? 0x80 : 0) | 126, len >> 8, len & 0xff]);
  if (!masked) return Buffer.concat([head, payload]);
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([head, mask, body]);
}

describe('WebSocket abuse', () => {
  it('closes a flooding or oversending socket with a proper code while a bystander keeps its feed', async () => {
    const bystander = await openSocket(alice.key);
    const outcomes: string[] = [];
    let ok = true;

    const flooder = await openSocket(alice.key);
    const started = Date.now();
    for (let i = 0; i < 1_000 && flooder.ws.readyState === WebSocket.OPEN; i++) flooder.ws.send(JSON.stringify({ type: 'feature_flags', data: { n: i } }));
    const flood = await flooder.closed;
    outcomes.push(`flood of 1,000 messages: ${flood.code} "${flood.reason}" after ${Date.now() - started} ms`);
    ok &&= flood.code === 1008;

    const big = await openSocket(alice.key);
    big.ws.send('x'.repeat(128 * 1024));
    const tooBig = await big.closed;
    outcomes.push(`128 KiB text frame: ${tooBig.code}`);
    ok &&= tooBig.code === 1009;

    const bin = await openSocket(alice.key);
    bin.ws.send(randomBytes(100 * 1024), { binary: true });
    const tooBigBinary = await bin.closed;
    outcomes.push(`100 KiB binary frame: ${tooBigBinary.code}`);
    ok &&= tooBigBinary.code === 1009;

    const frag = await openSocket(alice.key);
    frag.ws.send('y'.repeat(40 * 1024), { fin: false });
    frag.ws.send('y'.repeat(40 * 1024), { fin: true });
    const fragmented = await frag.closed;
    outcomes.push(`80 KiB in two fragments: ${fragmented.code}`);
    ok &&= fragmented.code === 1009;

    // Frames no client library would send, written on a raw connection.
    const raw: Array<[string, Buffer, number]> = [
      ['invalid UTF-8 in a text frame', clientFrame(0x81, Buffer.from([0xff, 0xfe, 0xfd])), 1007],
      ['an unmasked client frame', clientFrame(0x81, Buffer.from('hi'), false), 1002],
      ['a reserved opcode', clientFrame(0x83, Buffer.from('x')), 1002],
      ['RSV1 set without an extension', clientFrame(0xc1, Buffer.from('x')), 1002],
      ['a ping longer than 125 bytes', clientFrame(0x89, Buffer.alloc(200, 1)), 1002],
      ['a continuation with nothing to continue', clientFrame(0x80, Buffer.from('x')), 1002],
    ];
    for (const [what, frame, expected] of raw) {
      const r = await rawSocketCloseCode(alice.key, frame);
      outcomes.push(`${what}: ${r.code}`);
      ok &&= r.code === expected && r.ms < MAX_MS;
    }

    // The bystander stayed connected through all of it and still gets its account's messages.
    const job = await send(`${api}/api/v2/jobs`, { method: 'POST', headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ workflow: tinyImage(3) }) });
    let delivered = false;
    try {
      await waitUntil(() => bystander.texts.some((m) => m.type === 'execution_success' && m.data?.prompt_id === job.body.id), 15_000, 'execution_success on the bystander');
      delivered = true;
    } catch {
      delivered = false;
    }
    const stillOpen = bystander.ws.readyState === WebSocket.OPEN;
    outcomes.push(`bystander: ${stillOpen ? 'open' : 'closed'}, job messages ${delivered ? 'delivered' : 'missing'}`);
    ok &&= stillOpen && delivered && (await healthy());
    record({ tried: 'WebSocket abuse: message flood, oversized text/binary/fragmented frames, invalid UTF-8, unmasked, reserved opcode, RSV1, long ping, stray continuation', count: 10, outcome: outcomes.join('; '), held: ok });
    bystander.ws.close();
    expect(outcomes).toEqual([
      expect.stringMatching(/^flood of 1,000 messages: 1008 "too many messages"/),
      '128 KiB text frame: 1009',
      '100 KiB binary frame: 1009',
      '80 KiB in two fragments: 1009',
      ...raw.map(([what, , code]) => `${what}: ${code}`),
      'bystander: open, job messages delivered',
    ]);
    expect(await healthy()).toBe(true);
  });

  it('refuses sockets beyond the account\'s stream limit with 429, and accepts again once one closes', async () => {
    const carol = await stack.account({ name: 'carol' });
    await stack.accounts.setLimits(carol.id, { requestsPerMinute: 1_000_000, maxEventStreams: 3 });
    const open = [await openSocket(carol.key), await openSocket(carol.key), await openSocket(carol.key)];
    const refused: number[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await rawExchange(port, [`GET /ws?clientId=x${i}&token=${carol.key} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`], { giveUpMs: MAX_MS });
      refused.push(parseRawResponse(r.text).status);
    }
    open[0]!.ws.close();
    await open[0]!.closed;
    let reopened = false;
    await waitUntil(async () => {
      try {
        open.push(await openSocket(carol.key));
        reopened = true;
      } catch {
        reopened = false;
      }
      return reopened;
    }, 10_000, 'a socket after one closed');
    const held = refused.every((s) => s === 429) && reopened;
    record({ tried: '20 WebSocket upgrades beyond an account\'s limit of 3 open streams', count: 20, outcome: `${refused.filter((s) => s === 429).length}× 429; a new socket opened after one closed: ${reopened}`, held });
    expect(refused.every((s) => s === 429)).toBe(true);
    for (const s of open) s.ws.close();
  });

  it('logged no unexpected error while answering all of the above', () => {
    const lines = errorLines(cloud.api.output, apiLogFrom);
    record({ tried: 'API error-level log lines during the whole suite', count: cloud.api.output.length - apiLogFrom, outcome: `${lines.length} unexpected errors logged`, held: lines.length === 0 });
    expect(lines).toEqual([]);
  });
});
