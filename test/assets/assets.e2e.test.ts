import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '#libs/config';
import { createBlobStore, signBlobUrl } from '#libs/storage';
import { bearer, call, envelopeCode, jsonInit, uploadForm } from '../support/http.js';
import { startCloud } from '../support/cloud.js';
import { waitUntil } from '../support/jobs.js';
import { testPng } from '../v1/v1-world.js';
import { TEST_SIGNING_SECRET, TestStack, type StorageKind } from '../support/stack.js';
import type { RunningProcess } from '../support/processes.js';

const MAX_UPLOAD = 6 * 1024 * 1024;

function b3sum(bytes: Uint8Array): string {
  const dir = mkdtempSync('/tmp/b3-');
  const file = path.join(dir, 'f');
  writeFileSync(file, bytes);
  return execFileSync('b3sum', ['--no-names', file]).toString().trim();
}

describe.each<StorageKind>(['s3', 'local'])('v2 assets on the %s store', (storage) => {
  const stack = new TestStack(storage);
  let api: RunningProcess;
  let alice: { id: string; key: string };
  let bob: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    api = await stack.startApi({ MAX_UPLOAD_BYTES: String(MAX_UPLOAD) });
    alice = await stack.account({ name: 'alice' });
    bob = await stack.account({ name: 'bob' });
  });
  afterAll(() => stack.close());

  const upload = (key: string, bytes: Uint8Array, name = 'input.png', fields: Record<string, string | string[]> = {}) =>
    call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(key), body: uploadForm(bytes, name, fields) });

  /** Downloads through the signed URL with no credentials at all. */
  const download = async (url: string) => {
    const res = await fetch(url);
    return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()), type: res.headers.get('content-type') };
  };

  it.each([0, 1, 1024, 1024 * 1024 + 17, 5 * 1024 * 1024])('stores %i bytes with the hash b3sum prints and returns them byte for byte', async (size) => {
    const bytes = randomBytes(size);
    const up = await upload(alice.key, bytes, 'data.bin', { content_type: 'application/octet-stream' });
    expect(up.status).toBe(201);
    expect(up.body.hash).toBe(`blake3:${b3sum(bytes)}`);
    expect(up.body.size_bytes).toBe(size);
    expect(up.body.created_new).toBe(true);
    for (const field of ['id', 'hash', 'size_bytes', 'content_type', 'file_path', 'created_new', 'created_at', 'url', 'url_expires_at', 'expires_at', 'job_id']) {
      expect(up.body).toHaveProperty(field);
    }
    const got = await download(up.body.url);
    expect(got.status).toBe(200);
    expect(got.bytes.equals(bytes)).toBe(true);

    const content = await call(`${api.url}/api/v2/assets/${up.body.id}/content`, { headers: bearer(alice.key) });
    expect(content.status).toBe(302);
    const location = content.headers.get('location')!;
    expect(location).not.toContain(alice.key);
    expect((await download(location)).bytes.equals(bytes)).toBe(true);
  });

  it('reads the record with a fresh signed url, and deletes it', async () => {
    const bytes = randomBytes(2048);
    const up = await upload(alice.key, bytes, 'cat.png', { file_path: 'photos/cat.png', tags: ['a', 'b'], expires_in: '3600' });
    expect(up.body.file_path).toBe('photos/cat.png');
    expect(up.body.content_type).toBe('image/png');
    expect(up.body.tags).toEqual(['a', 'b']);
    expect(Date.parse(up.body.expires_at)).toBeGreaterThan(Date.now() + 3500_000);
    const got = await call(`${api.url}/api/v2/assets/${up.body.id}`, { headers: bearer(alice.key) });
    expect(got.status).toBe(200);
    expect(got.body.id).toBe(up.body.id);
    expect(Date.parse(got.body.url_expires_at)).toBeGreaterThan(Date.now());
    expect((await download(got.body.url)).bytes.equals(bytes)).toBe(true);

    const del = await call(`${api.url}/api/v2/assets/${up.body.id}`, { method: 'DELETE', headers: bearer(alice.key) });
    expect(del.status).toBe(204);
    const gone = await call(`${api.url}/api/v2/assets/${up.body.id}`, { headers: bearer(alice.key) });
    expect(gone.status).toBe(404);
    expect(envelopeCode(gone)).toBe('not_found');
    // The blob had no other record: it is gone from the store too.
    const head = await call(`${api.url}/api/v2/assets/by-hash/${up.body.hash}`, { method: 'HEAD', headers: bearer(alice.key) });
    expect(head.status).toBe(404);
    expect(await stack.db.blob.findUnique({ where: { hash: up.body.hash.slice(7) } })).toBeNull();
  });

  it('stores identical bytes once, across accounts, without telling one account about the other', async () => {
    const bytes = randomBytes(4096);
    const first = await upload(alice.key, bytes);
    expect(first.status).toBe(201);
    // Bob has never uploaded these bytes: to him they are new, whoever else has them.
    const headBefore = await call(`${api.url}/api/v2/assets/by-hash/${first.body.hash}`, { method: 'HEAD', headers: bearer(bob.key) });
    expect(headBefore.status).toBe(404);
    const fromHash = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: first.body.hash }, bearer(bob.key)));
    expect(fromHash.status).toBe(404);
    expect(envelopeCode(fromHash)).toBe('blob_not_found');
    const second = await upload(bob.key, bytes);
    expect(second.status).toBe(201);
    expect(second.body.created_new).toBe(true);
    expect(second.body.hash).toBe(first.body.hash);
    expect(second.body.id).not.toBe(first.body.id);
    // Alice uploading again is deduplicated for her.
    const again = await upload(alice.key, bytes);
    expect(again.status).toBe(200);
    expect(again.body.created_new).toBe(false);
    expect(await stack.db.blob.count({ where: { hash: first.body.hash.slice(7) } })).toBe(1);
    // Deleting Alice's records leaves Bob's bytes intact.
    for (const id of [first.body.id, again.body.id]) {
      expect((await call(`${api.url}/api/v2/assets/${id}`, { method: 'DELETE', headers: bearer(alice.key) })).status).toBe(204);
    }
    const bobs = await call(`${api.url}/api/v2/assets/${second.body.id}`, { headers: bearer(bob.key) });
    expect((await download(bobs.body.url)).bytes.equals(bytes)).toBe(true);
  });

  it('creates records from a known hash', async () => {
    const bytes = randomBytes(512);
    const up = await upload(alice.key, bytes, 'a.png');
    const head = await call(`${api.url}/api/v2/assets/by-hash/${up.body.hash}`, { method: 'HEAD', headers: bearer(alice.key) });
    expect(head.status).toBe(200);
    const same = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: up.body.hash }, bearer(alice.key)));
    expect(same.status).toBe(200);
    expect(same.body.id).toBe(up.body.id);
    const renamed = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: up.body.hash, file_path: 'b.webp', tags: ['x'] }, bearer(alice.key)));
    expect(renamed.status).toBe(201);
    expect(renamed.body.file_path).toBe('b.webp');
    expect(renamed.body.content_type).toBe('image/webp');
    expect(renamed.body.hash).toBe(up.body.hash);
    // The same request again finds the record it made, though it is not the oldest.
    const renamedAgain = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: up.body.hash, file_path: 'b.webp', tags: ['x'] }, bearer(alice.key)));
    expect(renamedAgain.status).toBe(200);
    expect(renamedAgain.body.id).toBe(renamed.body.id);
    expect(renamedAgain.body.created_new).toBe(false);
    const listExpiry = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: up.body.hash, expires_in: [3600] }, bearer(alice.key)));
    expect(listExpiry.status).toBe(400);
    expect(envelopeCode(listExpiry)).toBe('invalid_request');
    const unknown = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: `blake3:${'0'.repeat(64)}` }, bearer(alice.key)));
    expect(unknown.status).toBe(404);
    expect(envelopeCode(unknown)).toBe('blob_not_found');
    const malformed = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: 'md5:abc' }, bearer(alice.key)));
    expect(malformed.status).toBe(400);
  });

  it('refuses bytes that do not match expected_hash and stores nothing', async () => {
    const bytes = randomBytes(3000);
    const wrong = `blake3:${'ab'.repeat(32)}`;
    const res = await upload(alice.key, bytes, 'x.bin', { expected_hash: wrong });
    expect(res.status).toBe(409);
    expect(envelopeCode(res)).toBe('hash_mismatch');
    const actual = b3sum(bytes);
    expect(await stack.db.blob.findUnique({ where: { hash: actual } })).toBeNull();
    expect(await stack.db.asset.count({ where: { blobHash: actual } })).toBe(0);
    expect(await createBlobStore(loadConfig(stack.env())).has(actual)).toBe(false);
    const right = await upload(alice.key, bytes, 'x.bin', { expected_hash: `blake3:${actual}` });
    expect(right.status).toBe(201);
  });

  it('keeps one account out of another account\'s assets', async () => {
    const up = await upload(alice.key, randomBytes(100));
    for (const [method, suffix] of [['GET', ''], ['DELETE', ''], ['GET', '/content']] as const) {
      const res = await call(`${api.url}/api/v2/assets/${up.body.id}${suffix}`, { method, headers: bearer(bob.key) });
      expect(res.status).toBe(404);
      expect(envelopeCode(res)).toBe('not_found');
    }
    const missing = await call(`${api.url}/api/v2/assets/${crypto.randomUUID()}`, { headers: bearer(bob.key) });
    expect(missing.body).toEqual((await call(`${api.url}/api/v2/assets/${up.body.id}`, { headers: bearer(bob.key) })).body);
    expect((await call(`${api.url}/api/v2/assets/${up.body.id}`, { headers: bearer(alice.key) })).status).toBe(200);
  });

  it('counts an expired record of the same bytes as gone: the upload is new to the caller', async () => {
    const bytes = randomBytes(300);
    const first = await upload(alice.key, bytes, 'e.png', { expires_in: '60' });
    expect(first.status).toBe(201);
    // Its deadline passes; retention has not run yet, so the record is still in the table.
    await stack.db.asset.update({ where: { id: first.body.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect((await call(`${api.url}/api/v2/assets/${first.body.id}`, { headers: bearer(alice.key) })).status).toBe(404);
    expect((await call(`${api.url}/api/v2/assets/by-hash/${first.body.hash}`, { method: 'HEAD', headers: bearer(alice.key) })).status).toBe(404);
    const again = await upload(alice.key, bytes, 'e.png');
    expect(again.status).toBe(201);
    expect(again.body.created_new).toBe(true);
  });

  it('serves a file whose name is not ASCII through its signed url', async () => {
    const bytes = randomBytes(700);
    const up = await upload(alice.key, bytes, 'x.png', { file_path: "фото/写真 (it's).png" });
    expect(up.status).toBe(201);
    const res = await fetch(up.body.url);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    // RFC 6266: an ASCII stand-in, and the UTF-8 name with every character outside attr-char escaped.
    expect(res.headers.get('content-disposition')).toBe(`inline; filename="__ (it's).png"; filename*=UTF-8''%E5%86%99%E7%9C%9F%20%28it%27s%29.png`);
  });

  it('never lets an uploaded page run where it is served: a download on the bucket, sandboxed on the api', async () => {
    const page = Buffer.from('<html><script>alert(document.cookie)</script></html>');
    for (const contentType of ['text/html', 'image/svg+xml']) {
      const up = await upload(alice.key, Buffer.concat([page, randomBytes(8)]), 'p.html', { content_type: contentType });
      expect(up.status).toBe(201);
      const res = await fetch(up.body.url);
      expect(res.status).toBe(200);
      if (storage === 's3') {
        // A bucket sends no headers of ours: the browser gets a file to save, not a page to render.
        expect(res.headers.get('content-disposition')).toMatch(/^attachment; /);
      } else {
        expect(res.headers.get('content-security-policy')).toContain('sandbox');
        expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      }
    }
    // Inert media stay viewable in the browser.
    const image = await upload(alice.key, randomBytes(64), 'i.png', { content_type: 'image/png' });
    expect((await fetch(image.body.url)).headers.get('content-disposition')).toMatch(/^inline; /);
  });

  it('signs no link that outlives its asset', async () => {
    const shortLived = await upload(alice.key, randomBytes(90), 's.png', { expires_in: '120' });
    expect(shortLived.status).toBe(201);
    const again = await call(`${api.url}/api/v2/assets/${shortLived.body.id}`, { headers: bearer(alice.key) });
    for (const view of [shortLived.body, again.body]) {
      const [link, asset] = [Date.parse(view.url_expires_at), Date.parse(view.expires_at)];
      expect(link).toBeLessThanOrEqual(asset + 1000);
      expect(link).toBeGreaterThan(Date.now() + 60_000);
    }
    // One that lives longer than a link gets the link's whole lifetime (an hour by default).
    const lasting = await upload(alice.key, randomBytes(90), 'l.png');
    expect(Date.parse(lasting.body.url_expires_at)).toBeGreaterThan(Date.now() + 3_000_000);
  });

  it('leaves no bytes in the store when it refuses an upload', async () => {
    const store = createBlobStore(loadConfig(stack.env({ MAX_UPLOAD_BYTES: String(MAX_UPLOAD) })));
    const refused: [string, () => Promise<{ status: number }>, Uint8Array][] = [];
    const refuse = (what: string, bytes: Uint8Array, fields: Record<string, string | string[]>) =>
      refused.push([what, () => upload(alice.key, bytes, 'r.png', fields), bytes]);
    refuse('bad file_path', randomBytes(50), { file_path: '../x.png' });
    refuse('bad expires_in', randomBytes(50), { expires_in: '5' });
    refuse('bad content_type', randomBytes(50), { content_type: 'not a type' });
    refuse('malformed expected_hash', randomBytes(50), { expected_hash: 'junk' });
    refuse('too many tags', randomBytes(50), { tags: Array.from({ length: 33 }, (_, i) => `t${i}`) });
    const first = randomBytes(50);
    refused.push(['a second file part', () => {
      const form = uploadForm(first, 'a.png');
      form.append('file', new Blob([randomBytes(50)]), 'b.png');
      return call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: form });
    }, first]);
    const beforeLongField = randomBytes(50);
    refused.push(['a field too long after the file', () => {
      const form = uploadForm(beforeLongField, 'a.png');
      form.append('file_path', 'x'.repeat(70 * 1024));
      return call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: form });
    }, beforeLongField]);
    // The multipart limit cuts the stream at the limit: its first MAX_UPLOAD bytes must not stay either.
    const oversize = randomBytes(MAX_UPLOAD + 1024);
    refused.push(['an oversize file', () => upload(alice.key, oversize), oversize.subarray(0, MAX_UPLOAD)]);
    for (const [what, send, bytes] of refused) {
      const res = await send();
      expect([what, res.status >= 400 && res.status < 500]).toEqual([what, true]);
      expect([what, await store.has(b3sum(bytes))]).toEqual([what, false]);
    }
  });

  it('answers 413 in the envelope past the upload limit', async () => {
    const res = await upload(alice.key, randomBytes(MAX_UPLOAD + 1024));
    expect(res.status).toBe(413);
    expect(envelopeCode(res)).toBe('payload_too_large');
    expect(await stack.db.asset.count({ where: { accountId: alice.id, blob: { sizeBytes: { gt: BigInt(MAX_UPLOAD) } } } })).toBe(0);
  });

  it('rejects malformed uploads with clear 4xx errors', async () => {
    const noFile = new FormData();
    noFile.append('file_path', 'x.png');
    const r1 = await call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: noFile });
    expect(r1.status).toBe(400);
    expect(envelopeCode(r1)).toBe('invalid_request');
    const r2 = await call(`${api.url}/api/v2/assets`, jsonInit('POST', { file: 'x' }, bearer(alice.key)));
    expect(r2.status).toBe(415);
    expect(envelopeCode(r2)).toBe('unsupported_media_type');
    for (const file_path of ['../etc/passwd', '/abs.png', 'a//b.png', 'a\\b.png']) {
      const r = await upload(alice.key, randomBytes(10), 'x.png', { file_path });
      expect(r.status).toBe(400);
    }
    const badExpiry = await upload(alice.key, randomBytes(10), 'x.png', { expires_in: '5' });
    expect(badExpiry.status).toBe(400);
    const badType = await upload(alice.key, randomBytes(10), 'x.png', { content_type: 'not a type' });
    expect(badType.status).toBe(400);
    const truncated = await call(`${api.url}/api/v2/assets`, {
      method: 'POST',
      headers: bearer(alice.key, { 'content-type': 'multipart/form-data; boundary=XYZ' }),
      body: '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\nabc',
    });
    expect(truncated.status).toBeGreaterThanOrEqual(400);
    expect(truncated.status).toBeLessThan(500);
    envelopeCode(truncated);
  });
});

describe('signed URLs of the local store', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;
  let alice: { id: string; key: string };
  let asset: { id: string; hash: string; url: string };
  const bytes = randomBytes(10_000);

  beforeAll(async () => {
    await stack.open();
    api = await stack.startApi();
    alice = await stack.account();
    const res = await call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: uploadForm(bytes, 'r.bin') });
    asset = res.body;
  });
  afterAll(() => stack.close());

  it('serves ranges with 206 and refuses impossible ones with 416', async () => {
    const part = await fetch(asset.url, { headers: { range: 'bytes=100-199' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 100-199/${bytes.length}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(100, 200))).toBe(true);
    const suffix = await fetch(asset.url, { headers: { range: 'bytes=-10' } });
    expect(Buffer.from(await suffix.arrayBuffer()).equals(bytes.subarray(bytes.length - 10))).toBe(true);
    const bad = await call(asset.url, { headers: { range: `bytes=${bytes.length + 5}-` } });
    expect(bad.status).toBe(416);
    expect(bad.headers.get('content-range')).toBe(`bytes */${bytes.length}`);
    expect(envelopeCode(bad)).toBe('range_not_satisfiable');
  });

  it('answers 403 to a tampered or expired signature', async () => {
    const url = new URL(asset.url);
    const tampered = new URL(url);
    tampered.searchParams.set('name', 'other.bin');
    const r1 = await call(tampered.toString());
    expect(r1.status).toBe(403);
    expect(envelopeCode(r1)).toBe('forbidden');
    const badSig = new URL(url);
    badSig.searchParams.set('sig', `${url.searchParams.get('sig')!.slice(0, -2)}AA`);
    expect((await call(badSig.toString())).status).toBe(403);
    const later = new URL(url);
    later.searchParams.set('exp', String(Number(url.searchParams.get('exp')) + 1000));
    expect((await call(later.toString())).status).toBe(403);
    // A correctly signed URL whose time has passed: replay after expiry fails.
    const hash = asset.hash.slice(7);
    const expired = signBlobUrl(TEST_SIGNING_SECRET, { hash, expiresAt: Math.floor(Date.now() / 1000) - 5, fileName: 'r.bin', contentType: 'application/octet-stream' });
    const r2 = await call(`${api.url}/blobs/${hash}?${expired}`);
    expect(r2.status).toBe(403);
    expect(r2.body.error.message).toMatch(/expired/);
    const unsigned = await call(`${api.url}/blobs/${hash}`);
    expect(unsigned.status).toBe(403);
  });

  it('streams content directly on the self-hosted surface, with ranges, without credentials', async () => {
    const selfHosted = await stack.startApi({ SURFACE: 'self-hosted', API_PORT: '0' });
    const up = await call(`${selfHosted.url}/api/v2/assets`, { method: 'POST', body: uploadForm(bytes, 'local.bin') });
    expect(up.status).toBe(201);
    const res = await fetch(`${selfHosted.url}/api/v2/assets/${up.body.id}/content`, { headers: { range: 'bytes=0-9' } });
    expect(res.status).toBe(206);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes.subarray(0, 10))).toBe(true);
    const whole = await fetch(`${selfHosted.url}/api/v2/assets/${up.body.id}/content`);
    expect(whole.status).toBe(200);
    expect(Buffer.from(await whole.arrayBuffer()).equals(bytes)).toBe(true);
    // With a static token configured, it is required.
    const guarded = await stack.startApi({ SURFACE: 'self-hosted', API_PORT: '0', SELF_HOSTED_TOKEN: 'local-secret-token' });
    expect((await call(`${guarded.url}/api/v2/assets/${up.body.id}`)).status).toBe(401);
    expect((await call(`${guarded.url}/api/v2/assets/${up.body.id}`, { headers: bearer('local-secret-token') })).status).toBe(200);
  });

});

describe('deleting an asset a job uses', () => {
  const stack = new TestStack('local');
  let api: string;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    api = (await startCloud(stack)).api.url;
    alice = await stack.account();
  });
  afterAll(() => stack.close());

  it('answers 409 asset_in_use until the job ends, then deletes it', async () => {
    const up = await call(`${api}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: uploadForm(testPng(8, 8), 'in.png') });
    const workflow = {
      '1': { class_type: 'LoadImage', inputs: { image: { __type: 'core/ASSET', info: { id: up.body.id } } } },
      '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms: 1500 } },
      '3': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'in-use' } },
    };
    const job = await call(`${api}/api/v2/jobs`, jsonInit('POST', { workflow }, bearer(alice.key)));
    expect(job.status).toBe(201);
    const del = () => call(`${api}/api/v2/assets/${up.body.id}`, { method: 'DELETE', headers: bearer(alice.key) });
    const busy = await del();
    expect(busy.status).toBe(409);
    expect(envelopeCode(busy)).toBe('asset_in_use');
    expect((await call(`${api}/api/v2/assets/${up.body.id}`, { headers: bearer(alice.key) })).status).toBe(200);
    await waitUntil(async () => (await stack.db.job.findUniqueOrThrow({ where: { id: job.body.id } })).status === 'succeeded', 20_000, 'the job to succeed');
    expect((await del()).status).toBe(204);
    expect((await call(`${api}/api/v2/assets/${up.body.id}`, { headers: bearer(alice.key) })).status).toBe(404);
  });
});
