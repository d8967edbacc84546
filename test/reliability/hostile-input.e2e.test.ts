import fc from 'fast-check';
import { mintRouterToken } from '#libs/auth';
import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { ReliabilityReport } from '../support/reliability.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';
import { cases, encodeAny, errorLines, fuzz, hostileJson, hostileText, notEngineError, notEnvelope, notRouterError, send, type Answer } from './hostile-support.js';

/**
 * Every request body, query, path segment and header of the API, generated at random (fast-check)
 * or built to extremes, against the real api, worker and sim-engine. Whatever comes in, the answer
 * is a 4xx in the surface's own error shape, quickly, and never a 500.
 */
const report = new ReliabilityReport('Hostile input', 3);
const record = report.record.bind(report);

const stack = new TestStack('local');
let cloud: Cloud;
let api: string;
/** No credits: anything that passes validation is still refused (402), so no job ever runs. */
let poor: { id: string; key: string };
let rich: { id: string; key: string };
let bob: { id: string; key: string };
let routerToken: string;
let apiLogFrom = 0;

beforeAll(async () => {
  await stack.open();
  // The brute-force guard would answer 429 to everything once the header fuzz has failed enough logins.
  cloud = await startCloud(stack, { workers: 1, api: { AUTH_FAILURE_LIMIT: '0' } });
  api = cloud.api.url;
  poor = await stack.account({ name: 'poor', credits: 0n });
  rich = await stack.account({ name: 'rich' });
  bob = await stack.account({ name: 'bob' });
  for (const a of [poor, rich, bob]) {
    // Generous request rate (the fuzz is fast); a router with no spend allowed, so a valid call is refused before any partner.
    await stack.accounts.setLimits(a.id, { requestsPerMinute: 1_000_000, routerEnabled: true, routerSpendCapCents: 0, routerWindowCalls: 1_000_000, routerWindowSeconds: 60 });
  }
  routerToken = await mintRouterToken(TEST_ROUTER_SECRET, poor.id);
  apiLogFrom = cloud.api.output.length;
}, 60_000);

afterAll(async () => {
  report.save();
  await stack.close();
});

const json = (key: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json', ...extra });
const v1 = (key: string, extra: Record<string, string> = {}) => ({ 'x-api-key': key, ...extra });

function expect4xxEnvelope(a: Answer): string | null {
  if (a.status < 400 || a.status >= 500) return `status ${a.status}: ${a.text.slice(0, 200)}`;
  return notEnvelope(a);
}

function expect4xxRouter(a: Answer): string | null {
  if (a.status < 400 || a.status >= 500) return `status ${a.status}: ${a.text.slice(0, 200)}`;
  return notRouterError(a);
}

/** v1 prompt routes: the engine's 400, or an envelope for the cloud's own refusals (402 credits, 429 limits). */
function expectV1Refusal(a: Answer): string | null {
  if (a.status === 400) return notEngineError(a);
  if (a.status === 402 || a.status === 429) return notEnvelope(a);
  return `status ${a.status}: ${a.text.slice(0, 200)}`;
}

// The node classes of the engine plus names it does not know, and the input names they use.
const CLASSES = ['EmptyImage', 'SaveImage', 'PreviewImage', 'ImageInvert', 'ImageScale', 'LoadImage', 'SimSleep', 'KSampler', 'CheckpointLoaderSimple', 'CLIPTextEncode', 'EmptyLatentImage', 'VAEDecode'];
const INPUTS = ['image', 'images', 'width', 'height', 'batch_size', 'color', 'filename_prefix', 'ms', 'source', 'seed', 'steps', 'model', 'vae', 'samples', 'upscale_method', 'crop', 'text', 'clip'];
const nodeIds = fc.constantFrom('1', '2', '3', '4', '5');
const inputValue = fc.oneof(
  hostileJson(3),
  fc.tuple(nodeIds, fc.integer({ min: -1, max: 3 })),
  fc.tuple(hostileText(4), fc.oneof(fc.integer(), hostileText())),
);
const node = fc.record(
  {
    class_type: fc.oneof(fc.constantFrom(...CLASSES), hostileText(12), hostileJson(1)),
    inputs: fc.oneof({ weight: 5, arbitrary: fc.dictionary(fc.oneof(fc.constantFrom(...INPUTS), hostileText(8)), inputValue, { maxKeys: 6 }) }, hostileJson(1)),
    _meta: hostileJson(2),
  },
  { requiredKeys: ['class_type'] },
);
const graph = fc.dictionary(fc.oneof(nodeIds, hostileText(6)), node, { maxKeys: 6 });

describe('request bodies', () => {
  it('answers random JSON bodies on POST /api/v2/jobs with a 4xx envelope', async () => {
    await fuzz(record, 'random JSON bodies, POST /api/v2/jobs (fast-check)', hostileJson(5), (v) => send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(poor.key), body: JSON.stringify(v) ?? 'null' }), expect4xxEnvelope, 150);
  });

  it('answers random workflow graphs (wrong types, bad links, unknown classes) with a 4xx envelope', async () => {
    // Mostly graphs alone, so that most bodies reach the workflow validation.
    const extra = fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, hostileJson(2), fc.record({ api_key_comfy_org: hostileJson(1) }));
    const body = fc.record({ workflow: fc.oneof({ weight: 6, arbitrary: graph }, hostileJson(3)), extra_data: extra });
    await fuzz(record, 'random workflow graphs, POST /api/v2/jobs (fast-check)', body, (b) => send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(poor.key), body: JSON.stringify(b) }), expect4xxEnvelope, 200);
    expect(await stack.db.job.count({ where: { accountId: poor.id } })).toBe(0);
  });

  it('answers extreme workflows (huge, deep, cyclic, nested) with a 4xx envelope, quickly', async () => {
    const chain = (n: number) => {
      const wf: Record<string, unknown> = { '0': tinyImage()['1'] };
      for (let i = 1; i < n; i++) wf[String(i)] = { class_type: 'ImageInvert', inputs: { image: [String(i - 1), 0] } };
      wf.out = { class_type: 'SaveImage', inputs: { images: [String(n - 1), 0], filename_prefix: 'deep' } };
      return wf;
    };
    const ring = (n: number) => {
      const wf: Record<string, unknown> = {};
      for (let i = 0; i < n; i++) wf[String(i)] = { class_type: 'ImageInvert', inputs: { image: [String((i + 1) % n), 0] } };
      wf.out = { class_type: 'SaveImage', inputs: { images: ['0', 0], filename_prefix: 'ring' } };
      return wf;
    };
    const wide = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i), { class_type: 'PreviewImage', inputs: { images: ['x', 0] } }]));
    const nested = (depth: number) => `{"workflow":{"1":{"class_type":"SaveImage","inputs":{"filename_prefix":${'['.repeat(depth)}${']'.repeat(depth)}}}}}`;
    const withPrefix = (prefix: unknown) => ({ workflow: { ...tinyImage(), '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: prefix } } } });
    const extremes: Array<[string, string, number, RegExp?]> = [
      ['10,000 nodes', JSON.stringify({ workflow: wide(10_000) }), 422, /more than 5000 nodes/],
      ['a valid chain 4,999 nodes deep (refused for credits after full validation)', JSON.stringify({ workflow: chain(4_999) }), 402],
      ['a cycle through 4,000 nodes', JSON.stringify({ workflow: ring(4_000) }), 422, /cycle/],
      ['a node linked to itself', JSON.stringify({ workflow: ring(1) }), 422, /cycle/],
      ['arrays nested 100,000 deep', nested(100_000), 400, /nests deeper/],
      ['arrays nested 300 deep', nested(300), 400, /nests deeper/],
      ['arrays nested 200 deep (allowed depth, wrong type)', nested(200), 422],
      ['a 500,000-element array as an input', JSON.stringify(withPrefix(new Array(500_000).fill(0))), 422],
      ['a 2 MB string input', JSON.stringify(withPrefix('x'.repeat(2_000_000))), 402],
      ['one node with 10,000 inputs', JSON.stringify({ workflow: { '1': { class_type: 'SaveImage', inputs: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`in${i}`, i])) } } }), 422],
      ['a lone UTF-16 surrogate in a string', JSON.stringify(withPrefix('a\ud800b')), 422, /surrogate/],
      ['a NUL character in a string', JSON.stringify(withPrefix('a\u0000b')), 422, /NUL/],
      ['a "__proto__" node id', '{"workflow":{"__proto__":{"class_type":"SaveImage","inputs":{}}}}', 400],
      ['the editor (UI) format', JSON.stringify({ workflow: { nodes: [], links: [] } }), 422, /UI/],
      ...(['42', '[]', '"text"', 'null', 'true', '{}'].map((w) => [`workflow ${w}`, `{"workflow":${w}}`, w === 'null' ? 422 : 422] as [string, string, number])),
    ];
    await cases(
      record,
      'extreme workflows: 10,000 nodes, 4,999-deep chain, 4,000-node cycle, 100,000-deep nesting, huge strings and arrays, bad Unicode',
      extremes,
      ([, body]) => send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(poor.key), body }),
      (a, [, , status, message]) => {
        if (a.status !== status) return `status ${a.status} (expected ${status}): ${a.text.slice(0, 200)}`;
        if (message && !message.test(String(a.body?.error?.message))) return `message ${String(a.body?.error?.message).slice(0, 200)}`;
        return notEnvelope(a);
      },
    );
    // With credits, a cyclic graph is refused too instead of becoming a job the engine must fail.
    const cyclic = await send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(rich.key), body: JSON.stringify({ workflow: ring(3) }) });
    expect(cyclic.status).toBe(422);
    expect(cyclic.body.error.details.node_errors['0'][0].reason).toMatch(/Dependency cycle detected/);
    const v1Ring = await send(`${api}/api/prompt`, { method: 'POST', headers: v1(rich.key), body: JSON.stringify({ prompt: ring(3) }) });
    expect(v1Ring.status).toBe(400);
    expect(v1Ring.body.node_errors['0'].errors[0].type).toBe('dependency_cycle');
    expect(await stack.db.job.count({ where: { accountId: rich.id } })).toBe(0);
  });

  it('refuses text PostgreSQL cannot store (NUL, lone surrogates) before it reaches the database', async () => {
    // Rich has credits and a blob, so nothing but the text itself stands between these and an insert.
    const up = await send(`${api}/api/v2/assets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rich.key}`, 'content-type': 'multipart/form-data; boundary=U' },
      body: '--U\r\nContent-Disposition: form-data; name="file"; filename="u.png"\r\n\r\nunstorable\r\n--U--\r\n',
    });
    expect(up.status).toBe(201);
    const assetsBefore = await stack.db.asset.count({ where: { accountId: rich.id } });
    const bad = ['\u0000', 'a\ud800', '\udfffz'];
    const fromHash = (extra: object) => () => send(`${api}/api/v2/assets/from-hash`, { method: 'POST', headers: json(rich.key), body: JSON.stringify({ hash: up.body.hash, ...extra }) });
    const submit = (prefix: string) => () => send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(rich.key), body: JSON.stringify({ workflow: { ...tinyImage(), '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: prefix } } } }) });
    const prompt = (body: object) => () => send(`${api}/api/prompt`, { method: 'POST', headers: v1(rich.key), body: JSON.stringify(body) });
    const probes: Array<[string, () => Promise<Answer>, number]> = bad.flatMap((t) => [
      [`from-hash tag ${JSON.stringify(t)}`, fromHash({ tags: [t] }), 400],
      [`from-hash file_path ${JSON.stringify(t)}`, fromHash({ file_path: `${t}.png` }), 400],
      [`v2 workflow string ${JSON.stringify(t)}`, submit(t), 422],
      [`v1 prompt string ${JSON.stringify(t)}`, prompt({ prompt: { ...tinyImage(), '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: t } } } }), 400],
      [`v1 client_id ${JSON.stringify(t)}`, prompt({ prompt: tinyImage(), client_id: t }), 400],
    ] as Array<[string, () => Promise<Answer>, number]>);
    await cases(record, 'NUL and lone UTF-16 surrogates in tags, file paths, workflow strings and client ids (account with credits and a blob)', probes, ([, go]) => go(), (a, [, , status]) => {
      if (a.status !== status) return `status ${a.status} (expected ${status}): ${a.text.slice(0, 200)}`;
      return status === 400 && a.body?.error?.type ? notEngineError(a) : notEnvelope(a);
    });
    expect(await stack.db.asset.count({ where: { accountId: rich.id } })).toBe(assetsBefore);
    expect(await stack.db.job.count({ where: { accountId: rich.id } })).toBe(0);
  });

  it('answers random bodies on v1 /api/prompt in the engine\'s 400 shape', async () => {
    const body = fc.oneof(
      hostileJson(4).map((v) => JSON.stringify(v) ?? ''),
      hostileText(200),
      fc.record({ prompt: graph, client_id: fc.oneof(hostileText(), hostileJson(1)), prompt_id: fc.oneof(fc.uuid(), hostileText()), extra_data: hostileJson(2) }, { requiredKeys: ['prompt'] }).map((b) => JSON.stringify(b)),
    );
    const contentType = fc.constantFrom('application/json', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', '');
    await fuzz(
      record,
      'random bodies and graphs, v1 POST /api/prompt (fast-check)',
      fc.tuple(body, contentType),
      ([b, type]) => send(`${api}/api/prompt`, { method: 'POST', headers: v1(poor.key, type ? { 'content-type': type } : {}), body: b }),
      expectV1Refusal,
      200,
    );
    expect(await stack.db.job.count({ where: { accountId: poor.id } })).toBe(0);
  });

  it('answers random bodies on v1 /api/queue and /api/interrupt with 200 or the engine\'s 400', async () => {
    const body = fc.oneof(hostileJson(3).map((v) => JSON.stringify(v) ?? ''), fc.record({ delete: fc.oneof(fc.array(hostileText()), hostileJson(2)), clear: hostileJson(1) }).map((b) => JSON.stringify(b)), hostileText());
    await fuzz(
      record,
      'random bodies, v1 POST /api/queue and /api/interrupt (fast-check)',
      fc.tuple(fc.constantFrom('/api/queue', '/api/interrupt'), body),
      ([path, b]) => send(`${api}${path}`, { method: 'POST', headers: v1(poor.key, { 'content-type': 'application/json' }), body: b }),
      (a) => (a.status === 200 ? null : a.status === 400 ? notEngineError(a) : `status ${a.status}: ${a.text.slice(0, 200)}`),
      100,
    );
  });

  it('answers random bodies on POST /api/v2/assets/from-hash with a 4xx envelope', async () => {
    const body = fc.oneof(
      hostileJson(3),
      fc.record({ hash: fc.oneof(hostileText(), fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `blake3:${h}`), hostileJson(1)), file_path: fc.oneof(hostileText(), hostileJson(1)), tags: fc.oneof(fc.array(hostileText()), hostileJson(2)), expires_in: hostileJson(1), content_type: hostileJson(1) }, { requiredKeys: [] }),
    );
    await fuzz(record, 'random bodies, POST /api/v2/assets/from-hash (fast-check)', body, (b) => send(`${api}/api/v2/assets/from-hash`, { method: 'POST', headers: json(poor.key), body: JSON.stringify(b) ?? 'null' }), expect4xxEnvelope, 100);
  });

  it('answers random model inputs on the router with its own 4xx shapes', async () => {
    const models = fc.constantFrom('openai/gpt-image-1', 'bfl/flux-pro-1.1', 'luma/ray-2', 'elevenlabs/eleven_v3', 'stability/stable-image-ultra');
    const body = fc.oneof({ weight: 4, arbitrary: hostileJson(4).map((v) => JSON.stringify(v) ?? '') }, hostileText(100), fc.constant(''));
    await fuzz(
      record,
      'random model inputs, POST /v1/models/{provider}/{model} (fast-check)',
      fc.tuple(models, body, fc.option(fc.string({ maxLength: 40 }).filter((k) => /^[\x20-\x7e]*$/.test(k)), { nil: undefined })),
      ([model, b, key]) => send(`${api}/v1/models/${model}`, { method: 'POST', headers: json(routerToken, key === undefined ? {} : { 'idempotency-key': key }), body: b }),
      expect4xxRouter,
      150,
    );
  });
});

/** A multipart body with boundary `B`, parts as given; `file` parts carry a filename. */
function multipart(boundary: string, parts: Array<{ name: string; value: string; filename?: string; headers?: string }>, close = true): string {
  const body = parts.map((p) => {
    const disposition = `Content-Disposition: form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    return `--${boundary}\r\n${p.headers ?? disposition}\r\n${p.filename !== undefined ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n${p.value}\r\n`;
  });
  return body.join('') + (close ? `--${boundary}--\r\n` : '');
}

describe('multipart uploads', () => {
  const BOUNDARY = 'hx7c41d0e2a99b3f56';
  const UPLOADS = [
    { path: '/api/v2/assets', file: 'file', headers: (extra: Record<string, string>) => ({ authorization: `Bearer ${poor.key}`, ...extra }) },
    { path: '/api/upload/image', file: 'image', headers: (extra: Record<string, string>) => v1(poor.key, extra) },
    { path: '/api/upload/mask', file: 'image', headers: (extra: Record<string, string>) => v1(poor.key, extra) },
  ];
  const textField = fc.record({ name: fc.oneof(fc.constantFrom('file_path', 'tags', 'tags[]', 'expires_in', 'type', 'subfolder', 'overwrite', 'original_ref'), hostileText(12).map((s) => s.replace(/["\r\n]/g, ''))), value: hostileText(40) });

  it('answers broken multipart bodies (no or wrong boundary, truncated, no file, extra files, too many fields, garbage) with a 4xx envelope', async () => {
    const defect = fc.oneof(
      fc.record({ kind: fc.constant('no boundary' as const), fields: fc.array(textField, { maxLength: 3 }) }),
      fc.record({ kind: fc.constant('wrong boundary' as const), fields: fc.array(textField, { maxLength: 3 }) }),
      fc.record({ kind: fc.constant('truncated' as const), fields: fc.array(textField, { maxLength: 3 }), cut: fc.double({ min: 0, max: 0.999, noNaN: true }) }),
      fc.record({ kind: fc.constant('no file part' as const), fields: fc.array(textField, { maxLength: 5 }) }),
      fc.record({ kind: fc.constant('several file parts' as const), fields: fc.array(textField, { maxLength: 2 }), files: fc.integer({ min: 2, max: 6 }) }),
      fc.record({ kind: fc.constant('too many fields' as const), count: fc.integer({ min: 101, max: 400 }) }),
      fc.record({ kind: fc.constant('garbage' as const), bytes: fc.uint8Array({ maxLength: 300 }) }),
      fc.record({ kind: fc.constant('broken part headers' as const), junk: fc.string({ maxLength: 60 }).map((s) => s.replace(/:/g, '')) }),
    );
    await fuzz(
      record,
      'broken multipart bodies on v2 /api/v2/assets and v1 /api/upload/{image,mask} (fast-check)',
      fc.tuple(fc.constantFrom(...UPLOADS), defect),
      ([route, d]) => {
        const ct = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };
        const file = { name: route.file, value: 'bytes of a file', filename: 'a.png' };
        let body: string | Buffer;
        switch (d.kind) {
          case 'no boundary':
            return send(`${api}${route.path}`, { method: 'POST', headers: route.headers({ 'content-type': 'multipart/form-data' }), body: multipart(BOUNDARY, [...d.fields, file]) });
          case 'wrong boundary':
            return send(`${api}${route.path}`, { method: 'POST', headers: route.headers({ 'content-type': 'multipart/form-data; boundary=other' }), body: multipart(BOUNDARY, [...d.fields, file]) });
          case 'truncated': {
            const whole = multipart(BOUNDARY, [...d.fields, file]);
            body = whole.slice(0, Math.floor(d.cut * (whole.length - `--${BOUNDARY}--\r\n`.length)));
            break;
          }
          case 'no file part':
            body = multipart(BOUNDARY, d.fields.filter((f) => f.name !== route.file));
            break;
          case 'several file parts':
            body = multipart(BOUNDARY, [...d.fields, ...Array.from({ length: d.files }, () => file)]);
            break;
          case 'too many fields':
            body = multipart(BOUNDARY, [...Array.from({ length: d.count }, (_, i) => ({ name: `f${i}`, value: 'v' })), file]);
            break;
          case 'garbage':
            body = Buffer.from(d.bytes);
            break;
          case 'broken part headers':
            body = multipart(BOUNDARY, [{ ...file, headers: `Content-Disposition form-data ${d.junk}` }]);
            break;
        }
        return send(`${api}${route.path}`, { method: 'POST', headers: route.headers(ct), body });
      },
      expect4xxEnvelope,
      150,
    );
    expect(await stack.db.asset.count({ where: { accountId: poor.id } })).toBe(0);
  });

  it('stores a well-formed upload with hostile field values only under a safe name, else answers 4xx', async () => {
    const value = fc.oneof(hostileText(60), fc.constantFrom('\u0000', 'tag\u0000', 'a\r\nb', '../../etc/passwd', '/abs.png', 'a//b', 'a\\b.png', '.', '..', 'a/./b', '%2e%2e%2fx', 'x'.repeat(2000), '', ' ', 'blake3:zz'));
    // One hostile field at a time, so that a value the API accepts is stored and can be checked.
    const fields = fc.oneof(
      fc.record({ file_path: value }),
      fc.record({ file_path: value, tags: fc.array(value, { maxLength: 40 }) }),
      fc.record({ expires_in: value }),
      fc.record({ content_type: value }),
      fc.record({ expected_hash: value }),
    );
    await fuzz(
      record,
      'hostile field values (file_path, tags, expires_in, content_type, expected_hash) in well-formed v2 uploads (fast-check)',
      fields,
      (f) => {
        const parts = Object.entries(f).flatMap(([name, v]) => (Array.isArray(v) ? v.map((t) => ({ name: 'tags', value: t })) : [{ name, value: v as string }]));
        return send(`${api}/api/v2/assets`, { method: 'POST', headers: { authorization: `Bearer ${rich.key}`, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: multipart(BOUNDARY, [...parts, { name: 'file', value: 'same small bytes', filename: 'in.png' }]) });
      },
      (a) => {
        if (a.status === 200 || a.status === 201) {
          const path = String(a.body.file_path);
          // eslint-disable-next-line no-control-regex
          const bad = path.startsWith('/') || path.split('/').some((s: string) => s === '..' || s === '.' || s === '') || /[\u0000-\u001f\u007f\\]/.test(path);
          return bad ? `stored under an unsafe file_path ${JSON.stringify(path)}` : null;
        }
        return expect4xxEnvelope(a);
      },
      100,
    );
  });
});

describe('queries, cursors, path segments and headers', () => {
  let v2Cursor: string;
  let bobCursor: string;
  let routerCursor: string;
  let bobRouterCursor: string;

  beforeAll(async () => {
    for (const who of [rich, bob]) {
      for (let i = 0; i < 2; i++) {
        const r = await send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(who.key), body: JSON.stringify({ workflow: tinyImage(i) }) });
        expect(r.status).toBe(201);
      }
    }
    const page = async (key: string) => (await send(`${api}/api/v2/jobs?limit=1`, { headers: { authorization: `Bearer ${key}` } })).body.next_cursor as string;
    v2Cursor = await page(rich.key);
    bobCursor = await page(bob.key);
    const models = async (token: string) => (await send(`${api}/v1/models?limit=1`, { headers: { authorization: `Bearer ${token}` } })).body.next_cursor as string;
    routerCursor = await models(routerToken);
    bobRouterCursor = await models(await mintRouterToken(TEST_ROUTER_SECRET, bob.id));
    expect([typeof v2Cursor, typeof bobCursor, typeof routerCursor, typeof bobRouterCursor]).toEqual(['string', 'string', 'string', 'string']);
  });

  it('answers random list queries with a page or a 400 in the surface\'s shape', async () => {
    const KEYS = ['limit', 'cursor', 'status', 'max_items', 'offset', 'filename', 'subfolder', 'type', 'clientId'];
    const value = fc.oneof(hostileText(30), fc.integer().map(String), fc.constantFrom('queued', 'running,failed', 'succeeded,', '-1', '0', '101', '1e3', '0x10', '99999999999999999999', ''));
    const pairs = fc.array(fc.tuple(fc.oneof(fc.constantFrom(...KEYS), hostileText(8)), value), { maxLength: 6 });
    const ROUTES = [
      { path: '/api/v2/jobs', headers: () => ({ authorization: `Bearer ${rich.key}` }), judge: (a: Answer) => (a.status === 200 ? (Array.isArray(a.body.data) && typeof a.body.has_more === 'boolean' && a.body.limit >= 1 && a.body.limit <= 100 ? null : `bad page ${a.text.slice(0, 200)}`) : a.status === 400 ? notEnvelope(a) : `status ${a.status}`) },
      // max_items and offset are integers (the engine's int() fails on anything else): refused in the envelope.
      { path: '/api/history', headers: () => v1(rich.key), judge: (a: Answer) => (a.status === 200 && typeof a.body === 'object' && !Array.isArray(a.body) ? null : a.status === 400 ? notEnvelope(a) : `status ${a.status}: ${a.text.slice(0, 200)}`) },
      { path: '/api/view', headers: () => v1(rich.key), judge: (a: Answer) => ([400, 403, 404].includes(a.status) ? notEnvelope(a) : `status ${a.status}: ${a.text.slice(0, 200)}`) },
      { path: '/v1/models', headers: () => ({ authorization: `Bearer ${routerToken}` }), judge: (a: Answer) => (a.status === 200 ? (Array.isArray(a.body.data) ? null : 'bad page') : a.status === 400 ? notRouterError(a) : `status ${a.status}`) },
    ];
    await fuzz(
      record,
      'random queries (limit, cursor, status, repeated keys…) on GET /api/v2/jobs, /api/history, /api/view, /v1/models (fast-check)',
      fc.tuple(fc.constantFrom(...ROUTES), pairs),
      ([route, kv]) => send(`${api}${route.path}?${kv.map(([k, v]) => `${encodeAny(k)}=${encodeAny(v)}`).join('&')}`, { headers: route.headers() }),
      (a, [route]) => route.judge(a),
      150,
    );
  });

  it('refuses tampered, truncated, forged and foreign cursors with 400', async () => {
    const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.';
    const tamper = fc.oneof(
      fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), to: fc.constantFrom(...B64) }),
      fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
      fc.record({ kind: fc.constant('append' as const), extra: fc.string({ minLength: 1, maxLength: 5 }) }),
      fc.record({ kind: fc.constant('random' as const), text: fc.string({ minLength: 1, maxLength: 80 }) }),
      fc.record({ kind: fc.constant('another account\'s' as const) }),
    );
    type Tamper = { kind: 'flip'; at: number; to: string } | { kind: 'truncate'; at: number } | { kind: 'append'; extra: string } | { kind: 'random'; text: string } | { kind: "another account's" };
    const apply = (cursor: string, t: Tamper, foreign: string): string => {
      switch (t.kind) {
        case 'flip': {
          const at = t.at % cursor.length;
          const to = t.to === cursor[at] ? (t.to === 'A' ? 'B' : 'A') : t.to;
          return cursor.slice(0, at) + to + cursor.slice(at + 1);
        }
        case 'truncate':
          return cursor.slice(0, t.at % cursor.length);
        case 'append':
          return cursor + t.extra;
        case 'random':
          return t.text;
        default:
          return foreign;
      }
    };
    // The untouched cursors work: a refusal below is the tampering's doing.
    expect((await send(`${api}/api/v2/jobs?cursor=${encodeURIComponent(v2Cursor)}`, { headers: { authorization: `Bearer ${rich.key}` } })).status).toBe(200);
    expect((await send(`${api}/v1/models?cursor=${encodeURIComponent(routerCursor)}`, { headers: { authorization: `Bearer ${routerToken}` } })).status).toBe(200);
    await fuzz(
      record,
      'tampered, truncated, random and other-account cursors on GET /api/v2/jobs and /v1/models (fast-check)',
      fc.tuple(fc.constantFrom('v2', 'router'), tamper),
      ([surface, t]) => {
        const cursor = surface === 'v2' ? apply(v2Cursor, t, bobCursor) : apply(routerCursor, t, bobRouterCursor);
        const path = surface === 'v2' ? '/api/v2/jobs' : '/v1/models';
        const auth = surface === 'v2' ? rich.key : routerToken;
        return send(`${api}${path}?cursor=${encodeURIComponent(cursor)}`, { headers: { authorization: `Bearer ${auth}` } });
      },
      (a, [surface]) => {
        if (a.status !== 400) return `status ${a.status} for a tampered cursor`;
        return surface === 'v2' ? notEnvelope(a) : notRouterError(a);
      },
      120,
    );
  });

  it('answers random path segments (encoded, raw, bad percent-encoding, over-long) with a 4xx in the surface\'s shape', async () => {
    const ROUTES: Array<[string, string]> = [
      ['GET', '/api/v2/jobs/{}'],
      ['GET', '/api/v2/jobs/{}/events'],
      ['GET', '/api/v2/jobs/{}/logs'],
      ['GET', '/api/v2/jobs/{}/workflow'],
      ['POST', '/api/v2/jobs/{}/cancel'],
      ['GET', '/api/v2/assets/{}'],
      ['GET', '/api/v2/assets/{}/content'],
      ['DELETE', '/api/v2/assets/{}'],
      ['HEAD', '/api/v2/assets/by-hash/{}'],
      ['GET', '/api/job/{}/status'],
      ['GET', '/api/history/{}'],
      ['GET', '/api/object_info/{}'],
      ['GET', '/v1/models/{}/{}'],
      ['GET', '/v1/models/{}/{}/openapi.json'],
      ['POST', '/v1/models/{}/{}'],
      ['GET', '/blobs/{}'],
    ];
    const segment = fc.oneof(
      hostileText(40).map(encodeAny),
      fc.stringMatching(/^[A-Za-z0-9%._~:@!$&'()*+,;=-]{1,40}$/),
      fc.uuid(),
      fc.constantFrom('..', '%2e%2e', '%00', '%2F', '%ZZ', '%E0%A4%A', 'a'.repeat(150), '__proto__', 'constructor'),
    );
    await fuzz(
      record,
      'random path segments on every route with a path parameter (fast-check)',
      fc.tuple(fc.constantFrom(...ROUTES), segment, segment),
      ([[method, template], a, b]) => {
        let n = 0;
        const path = template.replace(/\{\}/g, () => (n++ === 0 ? a : b));
        const headers = path.startsWith('/v1/models') ? json(routerToken) : path.startsWith('/api/v2') ? json(rich.key) : v1(rich.key);
        return send(`${api}${path}`, { method, path, headers, body: method === 'POST' ? '{}' : undefined });
      },
      (a, [[method, template]]) => {
        if (template === '/api/history/{}' || template === '/api/object_info/{}') {
          // The engine answers `{}` for an unknown prompt or class.
          if (a.status === 200) return typeof a.body === 'object' && !Array.isArray(a.body) ? null : `not an object: ${a.text.slice(0, 100)}`;
        }
        if (a.status < 400 || a.status >= 500) return `status ${a.status}: ${a.text.slice(0, 200)}`;
        if (method === 'HEAD') return null;
        return template.startsWith('/v1/models') ? notRouterError(a) : notEnvelope(a);
      },
      200,
    );
  });

  it('answers odd header values (Idempotency-Key, Content-Type, Accept, Prefer, X-Request-Id, credentials, Host) safely', async () => {
    // Every byte Node lets a client put in a header value: printable ASCII and Latin-1.
    const headerValue = fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f).map((c) => String.fromCharCode(c)), maxLength: 120 });
    const asset = await send(`${api}/api/v2/assets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rich.key}`, 'content-type': `multipart/form-data; boundary=B0` },
      body: multipart('B0', [{ name: 'file', value: 'host probe', filename: 'h.png' }]),
    });
    expect(asset.status).toBe(201);
    const CASES: Record<string, { go: (v: string) => Promise<Answer>; judge: (a: Answer, v: string) => string | null }> = {
      'idempotency-key': {
        go: (v) => send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(poor.key, { 'idempotency-key': v }), body: JSON.stringify({ workflow: tinyImage() }) }),
        judge: (a) => ([400, 402].includes(a.status) ? notEnvelope(a) : `status ${a.status}`),
      },
      'content-type (v2)': {
        go: (v) => send(`${api}/api/v2/jobs`, { method: 'POST', headers: { authorization: `Bearer ${poor.key}`, 'content-type': v }, body: '{"workflow":{}}' }),
        judge: expect4xxEnvelope,
      },
      'content-type (v1)': {
        go: (v) => send(`${api}/api/prompt`, { method: 'POST', headers: v1(poor.key, { 'content-type': v }), body: '{"prompt":{}}' }),
        judge: (a) => (a.status === 400 && a.body?.error?.type ? notEngineError(a) : expect4xxEnvelope(a)),
      },
      'content-type (router)': {
        go: (v) => send(`${api}/v1/models/openai/gpt-image-1`, { method: 'POST', headers: { authorization: `Bearer ${routerToken}`, 'content-type': v }, body: '{}' }),
        judge: expect4xxRouter,
      },
      'content-type (upload)': {
        go: (v) => send(`${api}/api/v2/assets`, { method: 'POST', headers: { authorization: `Bearer ${poor.key}`, 'content-type': v }, body: '--B\r\n\r\n' }),
        judge: expect4xxEnvelope,
      },
      accept: {
        go: (v) => send(`${api}/api/v2/jobs`, { headers: { authorization: `Bearer ${poor.key}`, accept: v } }),
        judge: (a) => (a.status === 200 ? null : `status ${a.status}`),
      },
      prefer: {
        go: (v) => send(`${api}/api/v2/jobs`, { method: 'POST', headers: json(poor.key, { prefer: v }), body: JSON.stringify({ workflow: tinyImage() }) }),
        judge: (a) => (a.status === 402 ? notEnvelope(a) : `status ${a.status}`),
      },
      'x-request-id': {
        go: (v) => send(`${api}/healthz`, { headers: { 'x-request-id': v } }),
        judge: (a, v) => {
          // The server sees the value without surrounding blanks, as HTTP defines it.
          const id = String(a.headers['x-request-id']);
          const kept = /^[A-Za-z0-9._:-]{1,64}$/.test(v.trim());
          return (kept ? id === v.trim() : /^[0-9a-f-]{36}$/.test(id)) ? null : `request id ${JSON.stringify(id)} for ${JSON.stringify(v)}`;
        },
      },
      'authorization (v2)': {
        go: (v) => send(`${api}/api/v2/jobs`, { headers: { authorization: v } }),
        judge: (a) => (a.status === 401 ? notEnvelope(a) : `status ${a.status}`),
      },
      'x-api-key (v1)': {
        go: (v) => send(`${api}/api/queue`, { headers: { 'x-api-key': v } }),
        judge: (a) => (a.status === 401 ? notEnvelope(a) : `status ${a.status}`),
      },
      'authorization (router)': {
        go: (v) => send(`${api}/v1/models`, { headers: { authorization: `Bearer ${v}` } }),
        judge: (a) => (a.status === 401 ? notRouterError(a) : `status ${a.status}`),
      },
      host: {
        go: (v) => send(`${api}/api/v2/assets/${asset.body.id}/content`, { headers: { authorization: `Bearer ${rich.key}`, host: v } }),
        // Links resolve against the request's origin, but only a well-formed host is ever used for it.
        judge: (a, v) => {
          if (a.status !== 302) return `status ${a.status}`;
          const location = String(a.headers.location);
          const origin = /^[A-Za-z0-9.:[\]-]+$/.test(v.trim()) ? `http://${v.trim()}/` : `${api}/`;
          return location.startsWith(origin) && !/[\s"<>]/.test(location) ? null : `location ${location} for host ${JSON.stringify(v)}`;
        },
      },
    };
    await fuzz(
      record,
      'random header values: Idempotency-Key, Content-Type (v2, v1, router, upload), Accept, Prefer, X-Request-Id, Authorization, X-API-Key, Host (fast-check)',
      fc.tuple(fc.constantFrom(...Object.keys(CASES)), headerValue),
      ([name, v]) => CASES[name]!.go(v),
      (a, [name, v]) => CASES[name]!.judge(a, v),
      200,
    );
  });

  it('logged no unexpected error while answering all of the above', () => {
    const lines = errorLines(cloud.api.output, apiLogFrom);
    record({ tried: 'API error-level log lines during the whole suite', count: cloud.api.output.length - apiLogFrom, outcome: `${lines.length} unexpected errors logged`, held: lines.length === 0 });
    expect(lines).toEqual([]);
  });
});
