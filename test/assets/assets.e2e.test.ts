import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { loadConfig } from '#libs/config';
import { createBlobStore, signBlobUrl } from '#libs/storage';
import { bearer, call, envelopeCode, jsonInit, uploadForm, type Reply } from '../support/http.js';
import { startCloud, tinyImage } from '../support/cloud.js';
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

/** Every object the stack's store holds (blobs and temporary files alike). */
async function storedKeys(stack: TestStack): Promise<string[]> {
  if (stack.storage === 'local') {
    if (!existsSync(stack.blobDir)) return [];
    return readdirSync(stack.blobDir, { recursive: true, withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => path.join(d.parentPath, d.name))
      .sort();
  }
  const s3 = new S3Client({
    endpoint: stack.services.s3Endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  try {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: stack.bucket }));
    return (listed.Contents ?? []).map((o) => o.Key!).sort();
  } finally {
    s3.destroy();
  }
}

/** Waits until `n` sessions of the stack's database wait on a lock. */
async function lockWaiters(stack: TestStack, n: number): Promise<void> {
  await waitUntil(
    async () => {
      const rows = await stack.db.$queryRaw<{ n: bigint }[]>`
        SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
      return Number(rows[0]!.n) >= n;
    },
    10_000,
    `${n} sessions waiting on a lock`,
  );
}

interface RawReply {
  status: number;
  head: string;
  body: string;
  sentBytes: number;
  closed: boolean;
}

/**
 * Sends a multipart upload by hand: headers declaring `declaredBytes`, then the file part a chunk
 * at a time, slowly, until the server answers or `maxSendBytes` are sent.
 */
function slowOversizeUpload(port: number, key: string, declaredBytes: number, maxSendBytes: number): Promise<RawReply | null> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunk = randomBytes(256 * 1024);
    let received = '';
    let sentBytes = 0;
    let answered = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (reply: RawReply | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reply);
    };
    const parse = (closed: boolean): RawReply | null => {
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) return null;
      const head = received.slice(0, end);
      return { status: Number(head.split(' ')[1]), head: head.toLowerCase(), body: received.slice(end + 4), sentBytes, closed };
    };
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      answered = true;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => finish(parse(true)));
    const preamble =
      '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n';
    socket.write(
      `POST /api/v2/assets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: ${declaredBytes}\r\n\r\n${preamble}`,
    );
    const sendMore = () => {
      if (answered) {
        // The answer is in; give the server a moment to close the connection, then report.
        timer = setTimeout(() => finish(parse(socket.readableEnded)), 1000);
        return;
      }
      if (sentBytes >= maxSendBytes || socket.destroyed) {
        finish(parse(false));
        return;
      }
      socket.write(chunk);
      sentBytes += chunk.length;
      timer = setTimeout(sendMore, 20);
    };
    sendMore();
  });
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
    // Every later read of a record says what its upload said.
    for (const [who, up] of [[alice, first], [bob, second], [alice, again]] as const) {
      const read = await call(`${api.url}/api/v2/assets/${up.body.id}`, { headers: bearer(who.key) });
      expect([up.body.id, read.body.created_new]).toEqual([up.body.id, up.body.created_new]);
    }
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
    // A new record (201) over bytes that were already there: they are not new.
    expect(renamed.status).toBe(201);
    expect(renamed.body.created_new).toBe(false);
    expect((await call(`${api.url}/api/v2/assets/${renamed.body.id}`, { headers: bearer(alice.key) })).body.created_new).toBe(false);
    expect([up.body.created_new, (await call(`${api.url}/api/v2/assets/${up.body.id}`, { headers: bearer(alice.key) })).body.created_new]).toEqual([true, true]);
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

  it('says created_new of one upload only when the same new bytes come twice at once', async () => {
    const bytes = randomBytes(5000);
    const both = await Promise.all([upload(alice.key, bytes, 'twin.png'), upload(alice.key, bytes, 'twin.png')]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 201]);
    expect(both.map((r) => r.body.created_new).sort()).toEqual([false, true]);
    for (const r of both) expect((await call(`${api.url}/api/v2/assets/${r.body.id}`, { headers: bearer(alice.key) })).body.created_new).toBe(r.body.created_new);
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

  it('parses the text fields with the declared AssetUpload fields: a hash in any case without blake3:, tags and tags[], refusals in its words', async () => {
    const bytes = randomBytes(700);
    const actual = b3sum(bytes);
    const up = await upload(alice.key, bytes, 'f.bin', { expected_hash: actual.toUpperCase(), 'tags[]': ['one'], tags: 'two', file_path: '', content_type: '' });
    expect([up.status, up.body.hash, up.body.tags, up.body.file_path]).toEqual([201, `blake3:${actual}`, ['one', 'two'], 'f.bin']);
    const refusal = async (fields: Record<string, string | string[]>) => {
      const r = await upload(alice.key, randomBytes(40), 'g.bin', fields);
      return [r.status, envelopeCode(r), r.body.error.message];
    };
    expect(await refusal({ expected_hash: 'blake3:xyz' })).toEqual([400, 'invalid_request', 'expected_hash must look like blake3:<64 hex digits>.']);
    expect(await refusal({ 'tags[]': Array.from({ length: 20 }, (_, i) => `a${i}`), tags: Array.from({ length: 13 }, (_, i) => `b${i}`) })).toEqual([400, 'invalid_request', 'At most 32 tags are allowed.']);
    expect(await refusal({ expires_in: '59' })).toEqual([400, 'invalid_request', 'expires_in must be a whole number of seconds from 60 to 604800.']);
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
      expect(link).toBeLessThanOrEqual(asset);
      expect(link).toBeGreaterThan(Date.now() + 60_000);
    }
    // Whatever fraction of a second the deadline falls on, the link ends at it or before.
    for (let tenths = 0; tenths < 10; tenths++) {
      const expiresAt = new Date(Date.now() + 100_000 + tenths * 100 + 37);
      await stack.db.asset.update({ where: { id: shortLived.body.id }, data: { expiresAt } });
      const view = (await call(`${api.url}/api/v2/assets/${shortLived.body.id}`, { headers: bearer(alice.key) })).body;
      expect([tenths, Date.parse(view.url_expires_at) <= expiresAt.getTime()]).toEqual([tenths, true]);
      if (storage === 'local') expect(Number(new URL(view.url).searchParams.get('exp')) * 1000).toBeLessThanOrEqual(expiresAt.getTime());
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

  it('deletes an asset while another account records the same bytes: both succeed and the blob stays', async () => {
    const bytes = randomBytes(1500);
    const mine = await upload(alice.key, bytes, 'race.png');
    expect(mine.status).toBe(201);
    const hash = mine.body.hash.slice(7);
    let bobs!: Promise<Reply>;
    let removal!: Promise<Reply>;
    // Holding the blob row stops Bob's upload at its foreign-key check, its asset row written but
    // not committed; the deletion of Alice's record then meets it. Releasing the row lets Bob's
    // upload commit first, while the deletion is under way.
    await stack.db.$transaction(
      async (tx) => {
        await tx.$queryRaw`SELECT hash FROM blobs WHERE hash = ${hash} FOR UPDATE`;
        bobs = upload(bob.key, bytes, 'race.png');
        await lockWaiters(stack, 1);
        removal = call(`${api.url}/api/v2/assets/${mine.body.id}`, { method: 'DELETE', headers: bearer(alice.key) });
        await lockWaiters(stack, 2);
      },
      { timeout: 30_000 },
    );
    const [del, up] = await Promise.all([removal, bobs]);
    expect([del.status, up.status]).toEqual([204, 201]);
    expect((await call(`${api.url}/api/v2/assets/${mine.body.id}`, { headers: bearer(alice.key) })).status).toBe(404);
    expect(await stack.db.blob.findUnique({ where: { hash } })).not.toBeNull();
    expect((await download(up.body.url)).bytes.equals(bytes)).toBe(true);
  });

  it('makes a permanent record from a hash when only an expiring record matches', async () => {
    const bytes = randomBytes(400);
    const temp = await upload(alice.key, bytes, 't.png', { expires_in: '3600' });
    expect(temp.status).toBe(201);
    const permanent = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: temp.body.hash }, bearer(alice.key)));
    expect(permanent.status).toBe(201);
    expect(permanent.body.id).not.toBe(temp.body.id);
    expect(permanent.body.expires_at).toBeNull();
    expect(permanent.body.created_new).toBe(false);
    // Now a permanent record like it exists: the same request finds it.
    const again = await call(`${api.url}/api/v2/assets/from-hash`, jsonInit('POST', { hash: temp.body.hash }, bearer(alice.key)));
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(permanent.body.id);
  });

  it('ignores a file part type that is not a media type and guesses from the file name', async () => {
    const form = new FormData();
    form.append('file', new Blob([randomBytes(64)], { type: 'garbage' }), 'g.png');
    const up = await call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: form });
    expect(up.status).toBe(201);
    expect(up.body.content_type).toBe('image/png');
    const res = await fetch(up.body.url);
    expect(res.headers.get('content-type')).toBe('image/png');
    const unnamed = new FormData();
    unnamed.append('file', new Blob([randomBytes(64)], { type: 'garbage' }), 'g.weird');
    const other = await call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: unnamed });
    expect(other.status).toBe(201);
    expect(other.body.content_type).toBe('application/octet-stream');
  });

  it('answers 413 as soon as an upload passes the limit, closes the connection and keeps nothing', async () => {
    const before = await storedKeys(stack);
    // A body declared at 10 GB, sent at about 12 MB/s: read to its end, it would never be answered.
    const reply = await slowOversizeUpload(api.port, alice.key, 10 * 1024 ** 3, 5 * MAX_UPLOAD);
    expect(reply).not.toBeNull();
    expect(reply!.status).toBe(413);
    expect(JSON.parse(reply!.body).error.code).toBe('payload_too_large');
    expect(reply!.head).toContain('connection: close');
    expect(reply!.sentBytes).toBeLessThan(2 * MAX_UPLOAD);
    expect(reply!.closed).toBe(true);
    expect(await storedKeys(stack)).toEqual(before);
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
    // The scheme name in any case, as on the cloud surface (RFC 7235).
    expect((await call(`${guarded.url}/api/v2/assets/${up.body.id}`, { headers: { authorization: 'bearer local-secret-token' } })).status).toBe(200);
    expect((await call(`${guarded.url}/api/v2/assets/${up.body.id}`, { headers: { authorization: 'BEARER local-secret-token' } })).status).toBe(200);
    expect((await call(`${guarded.url}/api/v2/assets/${up.body.id}`, { headers: { authorization: 'Basic local-secret-token' } })).status).toBe(401);
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

  const inputWorkflow = (assetId: string, ms: number) => ({
    '1': { class_type: 'LoadImage', inputs: { image: { __type: 'core/ASSET', info: { id: assetId } } } },
    '2': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms } },
    '3': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'race' } },
  });
  const finished = async (jobId: string) => {
    let status = '';
    await waitUntil(async () => {
      status = (await stack.db.job.findUniqueOrThrow({ where: { id: jobId } })).status;
      return ['succeeded', 'failed', 'canceled'].includes(status);
    }, 60_000, `job ${jobId} to end`);
    return stack.db.job.findUniqueOrThrow({ where: { id: jobId } });
  };

  it('never both creates a job and deletes the asset it uses, when the two race', async () => {
    const jobs: string[] = [];
    for (let round = 0; round < 25; round++) {
      const up = await call(`${api}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: uploadForm(testPng(8, 8, 100 + round), `r${round}.png`) });
      expect(up.status).toBe(201);
      const [job, del] = await Promise.all([
        call(`${api}/api/v2/jobs`, jsonInit('POST', { workflow: inputWorkflow(up.body.id, 50) }, bearer(alice.key))),
        call(`${api}/api/v2/assets/${up.body.id}`, { method: 'DELETE', headers: bearer(alice.key) }),
      ]);
      // Either the job came first (the deletion waits for it and refuses), or the deletion did.
      const outcome = [round, job.status, del.status];
      expect([[round, 201, 409], [round, 422, 204]]).toContainEqual(outcome);
      if (job.status === 422) expect(envelopeCode(job)).toBe('missing_asset');
      if (job.status === 201) jobs.push(job.body.id);
    }
    for (const id of jobs) {
      const job = await finished(id);
      expect([id, job.status, job.error]).toEqual([id, 'succeeded', null]);
    }
  }, 120_000);

  it('takes an asset id in any letter case in a workflow, and the worker stages it', async () => {
    const up = await call(`${api}/api/v2/assets`, { method: 'POST', headers: bearer(alice.key), body: uploadForm(testPng(8, 8, 200), 'upper.png') });
    expect(up.status).toBe(201);
    const job = await call(`${api}/api/v2/jobs`, jsonInit('POST', { workflow: inputWorkflow(up.body.id.toUpperCase(), 1500) }, bearer(alice.key)));
    expect(job.status).toBe(201);
    // The job holds the asset whatever case it was named in.
    const busy = await call(`${api}/api/v2/assets/${up.body.id}`, { method: 'DELETE', headers: bearer(alice.key) });
    expect(busy.status).toBe(409);
    const done = await finished(job.body.id);
    expect([done.status, done.error]).toEqual(['succeeded', null]);
  }, 60_000);

  it('makes a permanent record from a hash when only a job output matches', async () => {
    const job = await call(`${api}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(7) }, bearer(alice.key)));
    expect(job.status).toBe(201);
    await finished(job.body.id);
    const output = await stack.db.asset.findFirstOrThrow({ where: { jobId: job.body.id } });
    // Even a job output kept for ever is the job's, not the caller's own record.
    await stack.db.asset.update({ where: { id: output.id }, data: { expiresAt: null } });
    const body = { hash: `blake3:${output.blobHash}`, file_path: output.filePath, content_type: output.contentType, tags: output.tags };
    const record = await call(`${api}/api/v2/assets/from-hash`, jsonInit('POST', body, bearer(alice.key)));
    expect(record.status).toBe(201);
    expect(record.body.id).not.toBe(output.id);
    expect(record.body.job_id).toBeNull();
    expect(record.body.expires_at).toBeNull();
  }, 60_000);
});
