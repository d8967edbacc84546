import { jest } from '@jest/globals';
import { blake3Hex } from '#libs/storage';
import { DEV_KEYS, type SimProvider } from '../../apps/partner-sim/src/server.js';
import { RouterWorld, eventually, expectRequestId, expectRouterError, expectValidation, type Workspace } from './router-world.js';

jest.setTimeout(90_000);

// Every partner of the catalog against the partner simulator: its native request and answer, each
// of its outcomes in the contract's buckets, its credentials, and the re-hosting of its media.

const IMAGE = `data:image/png;base64,${Buffer.from('\x89PNG\r\n\x1a\nfirst frame').toString('base64')}`;

/** A valid body of each model; `text` is where a test writes its directives. */
const MODELS: Record<string, { provider: SimProvider; body: (text: string) => Record<string, unknown>; media: boolean }> = {
  'bfl/flux-pro-1.1': { provider: 'bfl', media: true, body: (t) => ({ prompt: `a lighthouse at dusk ${t}`, width: 1024, height: 768, output_format: 'png' }) },
  'bfl/flux-pro-1.1-ultra': { provider: 'bfl', media: true, body: (t) => ({ prompt: `a red fox ${t}`, aspect_ratio: '21:9', raw: true }) },
  'openai/gpt-image-1': { provider: 'openai', media: false, body: (t) => ({ model: 'gpt-image-1', prompt: `a watercolor whale ${t}`, size: '1024x1024', quality: 'low' }) },
  'stability/stable-image-ultra': { provider: 'stability', media: false, body: (t) => ({ prompt: `a castle in fog ${t}`, aspect_ratio: '16:9', seed: 42, output_format: 'webp' }) },
  'stability/sd3.5-large': { provider: 'stability', media: false, body: (t) => ({ prompt: `a robot gardener ${t}`, mode: 'image-to-image', image: IMAGE, strength: 0.6 }) },
  'recraft/recraftv3': { provider: 'recraft', media: true, body: (t) => ({ prompt: `a flat icon of a bicycle ${t}`, style: 'digital_illustration', n: 2 }) },
  'ideogram/ideogram-v3': { provider: 'ideogram', media: true, body: (t) => ({ prompt: `a poster that says HELLO ${t}`, rendering_speed: 'TURBO', num_images: 2, style_codes: ['0A1B2C3D', 'DEADBEEF'] }) },
  'kling/kling-v2-5-turbo': { provider: 'kling', media: true, body: (t) => ({ model_name: 'kling-v2-5-turbo', prompt: `waves at night ${t}`, mode: 'pro', duration: '5' }) },
  'luma/ray-2': { provider: 'luma', media: true, body: (t) => ({ model: 'ray-2', prompt: `a hummingbird ${t}`, resolution: '720p', duration: '5s' }) },
  'runway/gen4_turbo': { provider: 'runway', media: true, body: (t) => ({ model: 'gen4_turbo', promptImage: IMAGE, promptText: `the camera pulls back ${t}`, ratio: '1280:720', duration: 5 }) },
  'minimax/hailuo-02': { provider: 'minimax', media: true, body: (t) => ({ model: 'MiniMax-Hailuo-02', prompt: `a paper boat ${t}`, duration: 6, resolution: '768P' }) },
  'google/veo-3': { provider: 'google', media: true, body: (t) => ({ instances: [{ prompt: `a drummer on a rooftop ${t}` }], parameters: { aspectRatio: '16:9', resolution: '720p' } }) },
  'elevenlabs/eleven_v3': { provider: 'elevenlabs', media: false, body: (t) => ({ voice_id: 'JBFqnCBsd6RMkjVDRZzb', output_format: 'mp3_44100_128', model_id: 'eleven_v3', text: `Hello there! ${t}` }) },
};

/** The credential each provider must receive, as its header carries it. */
function credentialSent(provider: SimProvider, headers: Record<string, unknown>): boolean {
  switch (provider) {
    case 'bfl':
      return headers['x-key'] === DEV_KEYS.bfl;
    case 'ideogram':
      return headers['api-key'] === DEV_KEYS.ideogram;
    case 'google':
      return headers['x-goog-api-key'] === DEV_KEYS.google;
    case 'elevenlabs':
      return headers['xi-api-key'] === DEV_KEYS.elevenlabs;
    case 'kling': {
      const token = /^Bearer (.+)$/.exec(String(headers.authorization))?.[1] ?? '';
      const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8') || '{}') as { iss?: string; exp?: number };
      return claims.iss === DEV_KEYS.klingAccessKey && typeof claims.exp === 'number';
    }
    default:
      return headers.authorization === `Bearer ${DEV_KEYS[provider]}`;
  }
}

describe('partner models against the partner simulator', () => {
  const world = new RouterWorld();
  let ws: Workspace;

  beforeAll(async () => {
    await world.open({ ROUTER_DEADLINE_MS: '8000' });
    ws = await world.workspace();
  });
  afterAll(() => world.close());

  const record = (id: string) =>
    eventually(async () => {
      const row = await world.stack.db.routerCall.findUnique({ where: { id } });
      return row?.outcome ? row : null;
    });

  /** Every http(s) URL in a JSON text. */
  const urlsIn = (text: string) => [...text.matchAll(/"(https?:\/\/[^"]+)"/g)].map((m) => JSON.parse(`"${m[1]!}"`) as string);

  it.each(Object.keys(MODELS))('%s answers its native result; media are re-hosted, the body is otherwise unchanged', async (model) => {
    const spec = MODELS[model]!;
    const before = world.sim.received.length;
    const body = spec.body('');
    const reply = await world.post(ws.token, model, body);
    expect(`${reply.status} ${reply.text.slice(0, 200)}`).toMatch(/^200 /);
    expect(reply.headers.get('x-service-credits-used')).toBe(String(world.price(model)));
    const sent = world.sim.received.slice(before).filter((r) => r.provider === spec.provider);
    expect(sent.length).toBeGreaterThan(0);
    for (const r of sent) expect({ path: r.path, credential: credentialSent(spec.provider, r.headers) }).toEqual({ path: r.path, credential: true });
    const row = await record(expectRequestId(reply));
    expect(row).toMatchObject({ outcome: 'success', charged: true, costCents: Number(world.price(model)) });

    if (model.startsWith('elevenlabs/')) {
      expect(reply.headers.get('content-type')).toBe('audio/mpeg');
      expect(sent[0]!.path).toBe('/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb?output_format=mp3_44100_128');
      // The path and query parameters left the body; the rest is the native body.
      expect(JSON.parse(sent[0]!.body)).toEqual({ model_id: 'eleven_v3', text: 'Hello there! ' });
      const audio = Buffer.from(await (await fetch(`${world.api.url}/v1/models/${model}`, { method: 'POST', headers: { authorization: `Bearer ${ws.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).arrayBuffer());
      expect(audio.subarray(0, 2)).toEqual(Buffer.from([0xff, 0xfb]));
      return;
    }
    // The last JSON answer (Google's video download streams after it).
    const final = sent.filter((r) => r.answer).at(-1)!.answer!;
    if (!spec.media) {
      // Nothing to re-host: the provider's bytes, unchanged.
      expect(reply.text).toBe(final.body);
      return;
    }
    // Every provider URL of the final answer is replaced by a signed URL of ours, nothing else changes.
    const theirs = urlsIn(final.body).filter((u) => u.startsWith(world.sim.url) && (u.includes('/media/') || u.includes(':download')));
    expect(theirs.length).toBeGreaterThan(0);
    const ours = urlsIn(reply.text).filter((u) => u.startsWith(world.api.url));
    expect(ours).toHaveLength(theirs.length);
    let expected = final.body;
    for (const [i, url] of theirs.entries()) expected = expected.replace(JSON.stringify(url).slice(1, -1), JSON.stringify(ours[i]!).slice(1, -1));
    expect(reply.text).toBe(expected);
    for (const [i, url] of ours.entries()) {
      expect(url).toMatch(new RegExp(`^${world.api.url}/blobs/[0-9a-f]{64}\\?`));
      const exp = Number(new URL(url).searchParams.get('exp'));
      expect(Math.abs(exp - (Date.now() / 1000 + 24 * 3600))).toBeLessThan(120);
      // Fetched without any credential; the bytes are the provider's.
      const res = await fetch(url);
      expect(res.status).toBe(200);
      const bytes = Buffer.from(await res.arrayBuffer());
      const original = world.sim.media.bytes(world.sim.mediaIdOf(theirs[i]!));
      expect(blake3Hex(bytes)).toBe(blake3Hex(original));
      expect(res.headers.get('content-type')).toBe(world.sim.media.get(world.sim.mediaIdOf(theirs[i]!))!.contentType);
    }
    const assets = await world.stack.db.asset.findMany({ where: { accountId: ws.id, filePath: { startsWith: `router/${row.id}/` } } });
    expect(assets).toHaveLength(new Set(ours.map((u) => new URL(u).pathname)).size);
    for (const asset of assets) {
      expect(asset.tags).toEqual(['router', model]);
      expect(Math.abs(asset.expiresAt!.getTime() - Date.now() - 24 * 3600_000)).toBeLessThan(180_000);
    }
  });

  it('sends multipart providers the JSON fields as form fields, data URIs as files', async () => {
    const before = world.sim.received.length;
    expect((await world.post(ws.token, 'stability/sd3.5-large', MODELS['stability/sd3.5-large']!.body('form'))).status).toBe(200);
    expect((await world.post(ws.token, 'ideogram/ideogram-v3', MODELS['ideogram/ideogram-v3']!.body('form'))).status).toBe(200);
    const [stability, ideogram] = world.sim.received.slice(before);
    expect(stability!.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(stability!.headers.accept).toBe('application/json');
    expect(stability!.body).toMatch(/name="image"; filename="image\.png"\r\nContent-Type: image\/png\r\n\r\n\x89PNG/);
    expect(stability!.body).toMatch(/name="strength"\r\n\r\n0\.6\r\n/);
    expect(ideogram!.body.match(/name="style_codes"/g)).toHaveLength(2);
  });

  it('runway: THROTTLED and RUNNING are waited out; a retried poll does not lose the task', async () => {
    const before = world.sim.received.length;
    const reply = await world.post(ws.token, 'runway/gen4_turbo', MODELS['runway/gen4_turbo']!.body('[[throttled:300]] [[slow:200]]'));
    expect(reply.status).toBe(200);
    const polls = world.sim.received.slice(before).filter((r) => r.method === 'GET');
    const states = polls.map((p) => (JSON.parse(p.answer!.body) as { status: string }).status);
    expect(states).toContain('THROTTLED');
    expect(states).toContain('RUNNING');
    expect(states.at(-1)).toBe('SUCCEEDED');
    expect(polls.every((p) => p.headers['x-runway-version'] === '2024-11-06')).toBe(true);
  });

  it('minimax: task, poll, then the file lookup; the answer is the file record', async () => {
    const before = world.sim.received.length;
    const reply = await world.post(ws.token, 'minimax/hailuo-02', MODELS['minimax/hailuo-02']!.body('[[slow:100]]'));
    expect(reply.status).toBe(200);
    const hops = world.sim.received.slice(before).map((r) => `${r.method} ${r.path.split('?')[0]}`);
    expect(hops[0]).toBe('POST /v1/video_generation');
    expect(hops.at(-1)).toBe('GET /v1/files/retrieve');
    expect(hops.filter((h) => h === 'GET /v1/query/video_generation').length).toBeGreaterThan(1);
    expect(reply.body).toMatchObject({ file: { purpose: 'video_generation', filename: 'output.mp4', download_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/blobs\//) }, base_resp: { status_code: 0 } });
  });

  describe('keyed retries after the deadline, by each provider handle', () => {
    const pollers = ['bfl/flux-pro-1.1', 'kling/kling-v2-5-turbo', 'luma/ray-2', 'runway/gen4_turbo', 'minimax/hailuo-02', 'google/veo-3'];

    it.each(pollers)('%s: the retry on a replica that never saw the call collects the generation, dispatched once', async (model) => {
      const spec = MODELS[model]!;
      const hasty = await world.startApi({ ROUTER_DEADLINE_MS: '300' });
      try {
        const key = `late-${model}`;
        const body = spec.body(`late ${model} [[slow:1200]]`);
        const first = await world.post(ws.token, model, body, { 'idempotency-key': key }, hasty);
        expectRouterError(first, 504, 'deadline_exceeded');
        expect(Number(first.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        const row = await eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: ws.id, idempotencyKey: key, providerHandle: { not: null } } }));
        const retry = await world.post(ws.token, model, body, { 'idempotency-key': key });
        expect(`${retry.status} ${retry.text.slice(0, 200)}`).toMatch(/^200 /);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retry.headers.get('x-service-credits-used')).toBeNull();
        expect(world.sim.requests(spec.provider, { method: 'POST' }).filter((r) => r.body.includes(`late ${model}`))).toHaveLength(1);
        // Its media re-hosted, by whichever replica stored the generation first (each names its own origin here).
        expect(retry.text).toMatch(/http:\/\/127\.0\.0\.1:\d+\/blobs\/[0-9a-f]{64}\?/);
        const charged = await eventually(async () => {
          const r = await world.stack.db.routerCall.findUnique({ where: { id: row.id } });
          return r?.state === 'completed' ? r : null;
        });
        expect(charged).toMatchObject({ resultBucket: 'success', charged: true });
        expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: row.id } })).toBe(1);
      } finally {
        await hasty.stop();
      }
    });

    it('a generation being polled holds its slot: the workspace limit refuses a second call meanwhile', async () => {
      const narrow = await world.workspace({ routerMaxConcurrent: 1 });
      const first = world.post(narrow.token, 'kling/kling-v2-5-turbo', MODELS['kling/kling-v2-5-turbo']!.body('one slot [[slow:2500]]'));
      // This generation's own poll, not one of an earlier test's: the second call must come while it holds the slot.
      const taskId = await eventually(async () => {
        const created = world.sim.requests('kling', { method: 'POST' }).find((r) => r.body.includes('one slot') && r.answer);
        return created ? (JSON.parse(created.answer!.body) as { data: { task_id: string } }).data.task_id : null;
      });
      await eventually(async () => world.sim.requests('kling', { method: 'GET' }).some((r) => r.path.includes(taskId) && r.answer?.body.includes('processing')));
      expectRouterError(await world.post(narrow.token, 'runway/gen4_turbo', MODELS['runway/gen4_turbo']!.body('second')), 429, 'concurrency_limit_exceeded');
      expect((await first).status).toBe(200);
      expect((await world.post(narrow.token, 'runway/gen4_turbo', MODELS['runway/gen4_turbo']!.body('after'))).status).toBe(200);
    });
  });

  describe('outcomes in the contract buckets', () => {
    type Row = [model: string, directive: string, status: number, bucket: string, type?: string];
    const policy: Row[] = [
      ['bfl/flux-pro-1.1', 'refuse', 422, 'content_policy_violation', 'Request Moderated'],
      ['bfl/flux-pro-1.1', 'refuse-output', 422, 'content_policy_violation', 'Content Moderated'],
      ['openai/gpt-image-1', 'refuse', 422, 'content_policy_violation', 'moderation_blocked'],
      ['stability/stable-image-ultra', 'refuse', 422, 'content_policy_violation', 'content_moderation'],
      ['stability/stable-image-ultra', 'refuse-output', 422, 'content_policy_violation', 'CONTENT_FILTERED'],
      ['recraft/recraftv3', 'refuse', 422, 'content_policy_violation', 'inappropriate_content'],
      ['ideogram/ideogram-v3', 'refuse', 422, 'content_policy_violation', 'safety_check_failed'],
      ['ideogram/ideogram-v3', 'refuse-output', 422, 'content_policy_violation', 'is_image_safe'],
      ['kling/kling-v2-5-turbo', 'refuse', 422, 'content_policy_violation', '1301'],
      ['kling/kling-v2-5-turbo', 'refuse-output', 422, 'content_policy_violation', 'task_failed_risk_control'],
      ['luma/ray-2', 'refuse', 422, 'content_policy_violation', 'prompt_moderation'],
      ['luma/ray-2', 'refuse-output', 422, 'content_policy_violation', 'generation_failed_moderation'],
      ['runway/gen4_turbo', 'refuse', 422, 'content_policy_violation', 'SAFETY.INPUT.TEXT'],
      ['runway/gen4_turbo', 'refuse-output', 422, 'content_policy_violation', 'SAFETY.OUTPUT.VIDEO'],
      ['minimax/hailuo-02', 'refuse', 422, 'content_policy_violation', '1026'],
      ['minimax/hailuo-02', 'refuse-output', 422, 'content_policy_violation', '1027'],
      ['google/veo-3', 'refuse', 422, 'content_policy_violation', 'INVALID_ARGUMENT'],
      ['google/veo-3', 'refuse-output', 422, 'content_policy_violation', 'raiMediaFiltered'],
      ['elevenlabs/eleven_v3', 'refuse', 422, 'content_policy_violation', 'content_against_policy'],
    ];
    const invalid: Row[] = [
      ['bfl/flux-pro-1.1', 'invalid', 422, 'invalid_input', 'prompt_unsupported_glyphs'],
      ['openai/gpt-image-1', 'invalid', 422, 'invalid_input', 'invalid_value'],
      ['stability/stable-image-ultra', 'invalid', 422, 'invalid_input', 'bad_request'],
      ['recraft/recraftv3', 'invalid', 422, 'invalid_input', 'invalid_style_for_model'],
      ['ideogram/ideogram-v3', 'invalid', 422, 'invalid_input', 'bad_request'],
      ['kling/kling-v2-5-turbo', 'invalid', 422, 'invalid_input', '1201'],
      ['luma/ray-2', 'invalid', 422, 'invalid_input', 'resolution_duration_unsupported'],
      ['runway/gen4_turbo', 'invalid', 422, 'invalid_input', 'image_dimensions_too_small'],
      ['minimax/hailuo-02', 'invalid', 422, 'invalid_input', '2013'],
      ['google/veo-3', 'invalid', 422, 'invalid_input', 'INVALID_ARGUMENT'],
      ['elevenlabs/eleven_v3', 'invalid', 422, 'invalid_input', 'value_error.v3_stability_preset'],
    ];
    const common = (['fail', 'busy', 'ratelimit', 'nocredit', 'garbage', 'gw504', 'denied'] as const).flatMap((d) =>
      Object.keys(MODELS).map((m): Row => {
        const status = { fail: 502, busy: 503, ratelimit: 503, nocredit: 503, garbage: 502, gw504: 504, denied: 502 }[d];
        const bucket = { fail: 'provider_error', busy: 'service_unavailable', ratelimit: 'service_unavailable', nocredit: 'service_unavailable', garbage: 'provider_error', gw504: 'provider_timeout', denied: 'provider_error' }[d];
        return [m, d, status, bucket];
      }),
    );
    const pollers = ['bfl/flux-pro-1.1', 'kling/kling-v2-5-turbo', 'luma/ray-2', 'runway/gen4_turbo', 'minimax/hailuo-02', 'google/veo-3'];
    const polling: Row[] = pollers.flatMap((m): Row[] => [
      [m, 'weird', 502, 'provider_error'],
      [m, 'lost', 502, 'provider_error'],
    ]);
    const media: Row[] = Object.keys(MODELS)
      .filter((m) => MODELS[m]!.media)
      .map((m): Row => [m, 'mediafail', 502, 'provider_error']);

    it.each([...policy, ...invalid])('%s [[%s]] answers %i %s (type %s)', async (model, directive, status, bucket, type) => {
      const before = world.sim.received.length;
      const reply = await world.post(ws.token, model, MODELS[model]!.body(`[[${directive}]]`));
      const entries = expectValidation(reply, bucket);
      expect(entries.map((e) => e.type)).toContain(type);
      expect(status).toBe(422);
      // A provider's own 422 validation body passes byte for byte.
      const answer = world.sim.received.slice(before).at(-1)!.answer!;
      if (answer.status === 422 && answer.body.startsWith('{"detail":[')) expect(reply.text).toBe(answer.body);
      const row = await record(expectRequestId(reply));
      expect(row.outcome).toBe(bucket);
    });

    it.each([...common, ...polling, ...media])('%s [[%s]] answers %i %s', async (model, directive, status, bucket) => {
      const reply = await world.post(ws.token, model, MODELS[model]!.body(`[[${directive}]]`));
      expectRouterError(reply, status, bucket);
      // The provider's words about the router's own key never reach the caller.
      for (const key of Object.values(DEV_KEYS)) expect(reply.text).not.toContain(key);
      expect(await record(expectRequestId(reply))).toMatchObject({ outcome: bucket, charged: false });
    });

    it('charges a content-policy refusal as each model states, and per outcome where it is unknown', async () => {
      const charged = async (model: string, directive: string) => {
        const reply = await world.post(ws.token, model, MODELS[model]!.body(`[[${directive}]]`));
        expect(reply.headers.get('x-service-error-type')).toBe('content_policy_violation');
        expect(reply.headers.get('x-service-credits-used')).toBeNull();
        return (await record(expectRequestId(reply))).charged;
      };
      // `no`: never.
      expect(await charged('openai/gpt-image-1', 'refuse')).toBe(false);
      expect(await charged('runway/gen4_turbo', 'refuse-output')).toBe(false);
      expect(await charged('google/veo-3', 'refuse-output')).toBe(false);
      // `unknown`: the input refused is not billed, a generated output withheld is.
      expect(await charged('bfl/flux-pro-1.1', 'refuse')).toBe(false);
      expect(await charged('bfl/flux-pro-1.1', 'refuse-output')).toBe(true);
      expect(await charged('stability/stable-image-ultra', 'refuse')).toBe(false);
      expect(await charged('stability/stable-image-ultra', 'refuse-output')).toBe(true);
      expect(await charged('minimax/hailuo-02', 'refuse-output')).toBe(true);
      const listed = (await world.get(ws.token, '/v1/models?limit=100')).body.data as { id: string; billing: { charges_on_policy_rejection: string } }[];
      expect(new Set(listed.map((m) => m.billing.charges_on_policy_rejection))).toEqual(new Set(['no', 'unknown']));
    });

    it('kling: a refusal inside an HTTP 200 is still a refusal', async () => {
      const before = world.sim.received.length;
      const reply = await world.post(ws.token, 'kling/kling-v2-5-turbo', MODELS['kling/kling-v2-5-turbo']!.body('[[nocredit]]'));
      expectRouterError(reply, 503, 'service_unavailable');
      const answer = world.sim.received.slice(before).at(-1)!.answer!;
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toMatchObject({ code: 1102 });
    });
  });

  describe('credentials', () => {
    it("a wrong secret is refused by the provider: provider_error, and the secret reaches no caller, log or record", async () => {
      const wrong = Object.fromEntries(Object.entries(world.sim.routerEnv()).filter(([k]) => k.endsWith('_KEY')).map(([k]) => [k, `wrong-${k.toLowerCase()}-0123456789`]));
      const api = await world.startApi(wrong);
      try {
        for (const model of Object.keys(MODELS)) {
          const reply = await world.post(ws.token, model, MODELS[model]!.body('wrong key'), {}, api);
          expectRouterError(reply, 502, 'provider_error');
          expect(reply.body.detail).toMatch(/refused the router's credentials/);
          for (const secret of Object.values(wrong)) expect(reply.text).not.toContain(secret);
          const row = await record(expectRequestId(reply));
          expect(JSON.stringify(row)).not.toContain('wrong-');
        }
        // The simulator did see them, and refused them.
        expect(world.sim.received.some((r) => r.headers['x-key'] === wrong.ROUTER_BFL_API_KEY)).toBe(true);
        expect(api.output.join('\n')).not.toContain('wrong-');
      } finally {
        await api.stop();
      }
    });

    it('a provider without credentials is not called: its models answer service_unavailable', async () => {
      const api = await world.startApi({ ROUTER_BFL_API_KEY: '' });
      try {
        const before = world.sim.requests('bfl').length;
        const reply = await world.post(ws.token, 'bfl/flux-pro-1.1', MODELS['bfl/flux-pro-1.1']!.body('no key'), {}, api);
        expectRouterError(reply, 503, 'service_unavailable');
        expect(world.sim.requests('bfl')).toHaveLength(before);
        expect((await world.post(ws.token, 'recraft/recraftv3', MODELS['recraft/recraftv3']!.body(''), {}, api)).status).toBe(200);
      } finally {
        await api.stop();
      }
    });
  });
});

describe('re-hosting into S3', () => {
  const world = new RouterWorld('s3');
  let ws: Workspace;

  beforeAll(async () => {
    await world.open();
    ws = await world.workspace();
  });
  afterAll(() => world.close());

  it('streams a 5 MB video into the bucket and answers a presigned URL valid 24 hours', async () => {
    const before = world.sim.received.length;
    const reply = await world.post(ws.token, 'luma/ray-2', MODELS['luma/ray-2']!.body(`[[size:${5 * 1024 * 1024}]]`));
    expect(reply.status).toBe(200);
    const original = world.sim.received.slice(before).at(-1)!.answer!.body;
    const theirs = (JSON.parse(original) as { assets: { video: string } }).assets.video;
    const ours = (reply.body as { assets: { video: string } }).assets.video;
    expect(new URL(ours).searchParams.get('X-Amz-Expires')).toBe(String(24 * 3600));
    const res = await fetch(ours);
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.length).toBe(5 * 1024 * 1024);
    expect(blake3Hex(bytes)).toBe(blake3Hex(world.sim.media.bytes(world.sim.mediaIdOf(theirs))));
    const asset = await world.stack.db.asset.findFirstOrThrow({ where: { accountId: ws.id, contentType: 'video/mp4' } });
    expect(asset.blobHash).toBe(blake3Hex(bytes));
  });
});
