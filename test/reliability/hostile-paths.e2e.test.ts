import { readdirSync } from 'node:fs';
import path from 'node:path';
import { signBlobUrl } from '#libs/storage';
import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { ReliabilityReport } from '../support/reliability.js';
import { TEST_SIGNING_SECRET, TestStack } from '../support/stack.js';
import { cases, errorLines, notEngineError, notEnvelope, send, type Answer } from './hostile-support.js';

/**
 * Path traversal in every parameter that names a file: v1 `/api/view` (filename, subfolder, type),
 * v1 uploads and masks, v2 `file_path` and upload file names, file inputs of prompts, and the
 * signed blob URLs. Storage is content-addressed (`blake3/<hex>`) and names are only labels, so
 * nothing on disk can be named; what this proves is that no name reaches another account's file,
 * that names which climb out are refused as the engine refuses them, and that nothing is written
 * anywhere but under a hash.
 */
const report = new ReliabilityReport('Hostile input: file names and paths', 3.5);
const record = report.record.bind(report);

const stack = new TestStack('local');
let cloud: Cloud;
let api: string;
let alice: { id: string; key: string };
let bob: { id: string; key: string };
let apiLogFrom = 0;

interface Files {
  jobId: string;
  output: { filename: string; subfolder: string; type: string };
  outputHash: string;
  upload: string;
  uploadHash: string;
}
let aliceFiles: Files;
let bobFiles: Files;

const BOUNDARY = 'hxpaths5c0ffee';
function form(parts: Array<{ name: string; value: string | Buffer; filename?: string }>): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `Content-Disposition: form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(Buffer.from(`--${BOUNDARY}\r\n${disposition}\r\n${p.filename !== undefined ? 'Content-Type: image/png\r\n' : ''}\r\n`, 'utf8'), Buffer.from(p.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}
const multipartType = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };

/** Runs a tiny job and uploads a file as `who`, returning the names v1 clients would use. */
async function filesOf(who: { key: string }, color: number): Promise<Files> {
  const job = await send(`${api}/api/v2/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${who.key}`, 'content-type': 'application/json', prefer: 'wait=20' },
    body: JSON.stringify({ workflow: tinyImage(color) }),
  });
  expect(job.body.status).toBe('succeeded');
  const history = await send(`${api}/api/history/${job.body.id}`, { headers: { 'x-api-key': who.key } });
  const output = (Object.values(history.body[job.body.id].outputs)[0] as { images: Files['output'][] }).images[0]!;
  const upload = await send(`${api}/api/upload/image`, { method: 'POST', headers: { 'x-api-key': who.key, ...multipartType }, body: form([{ name: 'image', value: `upload of ${color}`, filename: 'mine.png' }]) });
  expect(upload.status).toBe(200);
  return { jobId: job.body.id, output, outputHash: String(job.body.outputs[0].hash).slice(7), upload: upload.body.name, uploadHash: upload.body.name.slice(0, 64) };
}

beforeAll(async () => {
  await stack.open();
  cloud = await startCloud(stack, { workers: 1, api: { AUTH_FAILURE_LIMIT: '0' } });
  api = cloud.api.url;
  alice = await stack.account({ name: 'alice' });
  bob = await stack.account({ name: 'bob' });
  for (const a of [alice, bob]) await stack.accounts.setLimits(a.id, { requestsPerMinute: 1_000_000 });
  aliceFiles = await filesOf(alice, 10);
  bobFiles = await filesOf(bob, 200);
  apiLogFrom = cloud.api.output.length;
}, 60_000);

afterAll(async () => {
  report.save();
  await stack.close();
});

// Names that climb out of a folder, name an absolute or Windows path, or hide control bytes.
const CLIMBING = [
  '..',
  '../',
  '../../etc/passwd',
  '../../../../../../../../etc/passwd',
  'a/../../b.png',
  'output/../../x.png',
  '..\\..\\windows\\win.ini',
  '/etc/passwd',
  '//etc/passwd',
  '/proc/self/environ',
  'C:\\Windows\\win.ini',
  '\\\\server\\share\\x.png',
  'a\u0000.png',
  'x.png\u0000.txt',
  'a\r\nb.png',
];
// Names that only look like traversal once decoded again; to the server they are plain odd labels.
const ENCODED = ['%2e%2e%2f', '%2e%2e/%2e%2e/etc/passwd', '..%2f..%2fetc%2fpasswd', '%252e%252e%252f', '..%5c..%5cwin.ini', '%c0%ae%c0%ae/', '....//....//etc/passwd', '..;/x', 'file:///etc/passwd', '~/.ssh/id_rsa'];

const view = (query: Record<string, string>, key = alice.key) => send(`${api}/api/view?${new URLSearchParams(query)}`, { headers: { 'x-api-key': key } });

/** Never a redirect to a file: 400 (bad name), 403 (folder escapes) or 404 (no such file of yours). */
function refusedView(a: Answer): string | null {
  if (![400, 403, 404].includes(a.status)) return `status ${a.status} location ${String(a.headers.location)}`;
  return notEnvelope(a);
}

describe('v1 /api/view', () => {
  it('serves the caller\'s own files by their exact names (the probes below can reach files)', async () => {
    const out = await view(aliceFiles.output);
    expect(out.status).toBe(302);
    expect(String(out.headers.location)).toContain(aliceFiles.outputHash);
    const up = await view({ filename: aliceFiles.upload, type: 'input' });
    expect(up.status).toBe(302);
    expect(String(up.headers.location)).toContain(aliceFiles.uploadHash);
  });

  it('never redirects to a file for a filename, subfolder or type that climbs out, or names another account\'s file', async () => {
    const { output, jobId } = aliceFiles;
    const theirs = bobFiles;
    const probes: Array<Record<string, string>> = [];
    for (const p of CLIMBING) {
      probes.push({ filename: p, subfolder: jobId, type: 'output' });
      probes.push({ filename: `${p}/${output.filename}`, subfolder: jobId, type: 'output' });
      probes.push({ filename: output.filename, subfolder: p, type: 'output' });
      probes.push({ filename: output.filename, subfolder: `${jobId}/${p}`, type: 'output' });
      probes.push({ filename: `${p}/${aliceFiles.upload}`, type: 'input' });
    }
    for (const p of [...CLIMBING, ...ENCODED]) probes.push({ filename: output.filename, subfolder: jobId, type: p });
    // Aimed at Bob's files from Alice's account, with and without climbing.
    probes.push(
      { filename: theirs.output.filename, subfolder: theirs.jobId, type: 'output' },
      { filename: `../${theirs.jobId}/${theirs.output.filename}`, subfolder: jobId, type: 'output' },
      { filename: theirs.output.filename, subfolder: `${jobId}/../${theirs.jobId}`, type: 'output' },
      { filename: theirs.output.filename, subfolder: `../${theirs.jobId}`, type: 'output' },
      { filename: `${theirs.jobId}/${theirs.output.filename} [output]` },
      { filename: theirs.upload, type: 'input' },
      { filename: `../../${theirs.upload}`, type: 'input' },
      { filename: `${aliceFiles.jobId}/../${theirs.upload}`, type: 'input' },
      { filename: path.join(stack.blobDir, 'blake3', theirs.uploadHash) },
      { filename: `blake3/${theirs.uploadHash}`, type: 'input' },
      { filename: `${theirs.uploadHash}.png`, subfolder: '../..', type: 'input' },
    );
    await cases(record, 'v1 /api/view: climbing, absolute, Windows and NUL/CRLF names in filename, subfolder and type; names of another account\'s files', probes, (q) => view(q), refusedView);
  });

  it('treats encoded look-alikes as plain labels: at most the caller\'s own file, by its own name', async () => {
    const own = new Set([aliceFiles.outputHash, aliceFiles.uploadHash]);
    const probes: Array<Record<string, string>> = ENCODED.flatMap((p) => [
      { filename: p, subfolder: aliceFiles.jobId, type: 'output' },
      { filename: `${p}/${aliceFiles.output.filename}`, subfolder: aliceFiles.jobId, type: 'output' },
      { filename: aliceFiles.output.filename, subfolder: p, type: 'output' },
      { filename: `${p}/${aliceFiles.upload}`, subfolder: '', type: 'input' },
      { filename: `${p}/${bobFiles.upload}`, subfolder: '', type: 'input' },
    ]);
    await cases(record, 'v1 /api/view: percent-encoded and look-alike traversal names (labels to the server)', probes, (q) => view(q), (a) => {
      if (a.status !== 302) return refusedView(a);
      // A flat upload namespace ignores folders in an input's name, as `clipspace/<name>` relies on.
      const blob = /\/blobs\/([0-9a-f]{64})\?/.exec(String(a.headers.location))?.[1];
      return blob && own.has(blob) ? null : `redirected to ${String(a.headers.location)}`;
    });
  });

  it('decodes a query once: a raw %2e%2e%2f reaches the server as ../ and is refused', async () => {
    const raw = ['%2e%2e%2f', '%2e%2e%2f%2e%2e%2fetc%2fpasswd', '..%2f..%2f', '%2fetc%2fpasswd', '..%5c..%5cwin.ini', '%00', 'x%0d%0ay'];
    const probes = raw.flatMap((p) => [`filename=${p}${aliceFiles.upload}&type=input`, `filename=${aliceFiles.output.filename}&subfolder=${p}&type=output`]);
    await cases(record, 'v1 /api/view: percent-encoded traversal sent raw (decoded once by the server)', probes, (q) => send(`${api}/api/view?${q}`, { headers: { 'x-api-key': alice.key } }), refusedView);
  });
});

describe('uploads and file references', () => {
  it('names every v1 upload by its hash, whatever filename and subfolder it was sent with', async () => {
    const names = [...CLIMBING.filter((n) => !/[\r\n"]/.test(n)), ...ENCODED, 'plain.png', ''];
    await cases(
      record,
      'v1 /api/upload/image with climbing filenames and subfolders (stored under the content hash)',
      names,
      (name) =>
        send(`${api}/api/upload/image`, {
          method: 'POST',
          headers: { 'x-api-key': alice.key, ...multipartType },
          body: form([{ name: 'image', value: `payload ${name}`, filename: name }, { name: 'subfolder', value: name }, { name: 'type', value: name }]),
        }),
      (a) => {
        if (a.status >= 400 && a.status < 500) return notEnvelope(a);
        if (a.status !== 200) return `status ${a.status}: ${a.text.slice(0, 200)}`;
        if (!/^[0-9a-f]{64}(\.[a-z0-9]{1,10})?$/.test(a.body.name) || a.body.subfolder !== '' || !['input', 'temp', 'output'].includes(a.body.type)) return `answered ${a.text}`;
        return null;
      },
    );
  });

  it('finds no original for a mask whose original_ref climbs out or names another account\'s file', async () => {
    const png = Buffer.from('89504e470d0a1a0a', 'hex');
    const refs: Array<Record<string, string>> = [
      ...CLIMBING.map((p) => ({ filename: p, subfolder: '', type: 'input' })),
      ...CLIMBING.map((p) => ({ filename: aliceFiles.upload, subfolder: p, type: 'output' })),
      ...ENCODED.map((p) => ({ filename: `${p}${aliceFiles.upload}`, subfolder: '', type: 'input' })),
      { filename: `../${aliceFiles.upload}`, subfolder: '', type: 'input' },
      { filename: bobFiles.upload, subfolder: '', type: 'input' },
      { filename: bobFiles.output.filename, subfolder: bobFiles.jobId, type: 'output' },
      { filename: bobFiles.output.filename, subfolder: `${aliceFiles.jobId}/../${bobFiles.jobId}`, type: 'output' },
    ];
    await cases(
      record,
      'v1 /api/upload/mask with climbing or foreign original_ref',
      refs,
      (ref) => send(`${api}/api/upload/mask`, { method: 'POST', headers: { 'x-api-key': alice.key, ...multipartType }, body: form([{ name: 'image', value: png, filename: 'mask.png' }, { name: 'original_ref', value: JSON.stringify(ref) }]) }),
      (a) => ([400, 403, 404].includes(a.status) ? notEnvelope(a) : `status ${a.status}: ${a.text.slice(0, 200)}`),
    );
  });

  it('refuses a climbing v2 file_path, and keeps only the base name of an upload\'s own file name', async () => {
    // eslint-disable-next-line no-control-regex
    const safe = (p: string) => !p.startsWith('/') && !p.split('/').some((s) => s === '..' || s === '.' || s === '') && !/[\u0000-\u001f\u007f\\]/.test(p);
    const hash = aliceFiles.uploadHash;
    type Probe = { via: 'file_path' | 'from-hash' | 'upload file name'; name: string };
    const probes: Probe[] = [...CLIMBING, ...ENCODED].flatMap((name) => [
      { via: 'file_path' as const, name },
      { via: 'from-hash' as const, name },
      ...(/[\r\n"]/.test(name) ? [] : [{ via: 'upload file name' as const, name }]),
    ]);
    await cases(
      record,
      'v2 file_path (upload and from-hash) and multipart file names that climb out',
      probes,
      (p) => {
        const auth = { authorization: `Bearer ${alice.key}` };
        if (p.via === 'from-hash') {
          return send(`${api}/api/v2/assets/from-hash`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ hash: `blake3:${hash}`, file_path: p.name }) });
        }
        const parts = p.via === 'file_path' ? [{ name: 'file_path', value: p.name }, { name: 'file', value: 'x', filename: 'x.png' }] : [{ name: 'file', value: 'x', filename: p.name }];
        return send(`${api}/api/v2/assets`, { method: 'POST', headers: { ...auth, ...multipartType }, body: form(parts) });
      },
      (a, p) => {
        if (a.status === 200 || a.status === 201) {
          // Accepted only as a harmless label: the encoded look-alikes, or the upload's base name.
          return safe(String(a.body.file_path)) && (p.via === 'upload file name' || ENCODED.includes(p.name)) ? null : `stored as ${JSON.stringify(a.body.file_path)}`;
        }
        return a.status === 400 ? notEnvelope(a) : `status ${a.status}: ${a.text.slice(0, 200)}`;
      },
    );
  });

  it('does not resolve a prompt\'s file input that climbs out or names another account\'s upload', async () => {
    const prompt = (image: string) => ({ '1': { class_type: 'LoadImage', inputs: { image } }, '2': { class_type: 'PreviewImage', inputs: { images: ['1', 0] } } });
    const names = [...CLIMBING, ...ENCODED.filter((n) => n.includes('/')), `../${aliceFiles.upload}`, `../../${bobFiles.upload}`, bobFiles.upload, `${aliceFiles.jobId}/../${aliceFiles.upload} [input]`];
    const probes = names.flatMap((name) => [{ surface: 'v1' as const, name }, { surface: 'v2' as const, name }]);
    // A plain name resolves to the caller's own upload of that file_path: the look-alikes Alice
    // stored as labels above are hers, and run as her files (never as paths on any disk).
    const labels = new Set((await stack.db.asset.findMany({ where: { accountId: alice.id, jobId: null }, select: { filePath: true } })).map((a) => a.filePath));
    await cases(
      record,
      'LoadImage inputs naming climbing paths or another account\'s upload (v1 /api/prompt, v2 /api/v2/jobs)',
      probes,
      (p) =>
        p.surface === 'v1'
          ? send(`${api}/api/prompt`, { method: 'POST', headers: { 'x-api-key': alice.key }, body: JSON.stringify({ prompt: prompt(p.name) }) })
          : send(`${api}/api/v2/jobs`, { method: 'POST', headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ workflow: prompt(p.name) }) }),
      (a, p) => {
        if (labels.has(p.name)) return a.status === 200 || a.status === 201 ? null : `her own label ${JSON.stringify(p.name)}: status ${a.status}`;
        if (p.surface === 'v1') return a.status === 400 ? notEngineError(a) : `status ${a.status}: ${a.text.slice(0, 200)}`;
        return a.status === 422 ? notEnvelope(a) : `status ${a.status}: ${a.text.slice(0, 200)}`;
      },
    );
    // The plain name of Alice's own upload does resolve: the refusals above are about the names.
    const own = await send(`${api}/api/prompt`, { method: 'POST', headers: { 'x-api-key': alice.key }, body: JSON.stringify({ prompt: prompt(aliceFiles.upload) }) });
    expect(own.status).toBe(200);
  });
});

describe('signed blob URLs and the store', () => {
  it('answers climbing blob paths with 4xx, even with a valid signature for a real blob', async () => {
    const hash = aliceFiles.uploadHash;
    const signed = signBlobUrl(TEST_SIGNING_SECRET, { hash, expiresAt: Math.floor(Date.now() / 1000) + 600, fileName: 'x.png', contentType: 'image/png' });
    const paths = [
      `/blobs/..%2f..%2fetc%2fpasswd?${signed}`,
      `/blobs/${hash}%2f..%2f..%2fetc%2fpasswd?${signed}`,
      `/blobs/${hash}%00?${signed}`,
      `/blobs/..?${signed}`,
      `/blobs/${hash}/../../etc/passwd?${signed}`,
      `/blobs/%2e%2e%2f${hash}?${signed}`,
      `/blobs/${hash.toUpperCase()}?${signed}`,
      `/blobs/${hash}.png?${signed}`,
      `/blobs/blake3%2f${hash}?${signed}`,
      `/blobs/..%5c..%5cwindows%5cwin.ini?${signed}`,
    ];
    expect((await send(`${api}/blobs/${hash}?${signed}`)).status).toBe(200);
    await cases(record, '/blobs/{hash} paths that climb or disguise the hash, with a valid signature', paths, (p) => send(`${api}${p}`, { path: p }), (a) => (a.status >= 400 && a.status < 500 ? notEnvelope(a) : `status ${a.status}`));
  });

  it('wrote nothing but blobs named by their hash', () => {
    const root = `/tmp/${stack.name}`;
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(full);
        else files.push(path.relative(root, full));
      }
    };
    walk(root);
    const stray = files.filter((f) => !/^blobs\/blake3\/[0-9a-f]{64}$/.test(f));
    record({ tried: 'files under the suite\'s storage directory after every probe above', count: files.length, outcome: `${files.length} files, ${stray.length} not named blobs/blake3/<hash>`, held: stray.length === 0 });
    expect(stray).toEqual([]);
  });

  it('logged no unexpected error while answering all of the above', () => {
    const lines = errorLines(cloud.api.output, apiLogFrom);
    record({ tried: 'API error-level log lines during the whole suite', count: cloud.api.output.length - apiLogFrom, outcome: `${lines.length} unexpected errors logged`, held: lines.length === 0 });
    expect(lines).toEqual([]);
  });
});
