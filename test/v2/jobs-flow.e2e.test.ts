import net from 'node:net';
import { Redis } from 'ioredis';
import { blake3Hex } from '#libs/storage';
import { decodePng } from '../../apps/sim-engine/src/png.js';
import { slowJob, startCloud, textToImage, tinyImage, type Cloud } from '../support/cloud.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { bearer, call, envelopeCode, jsonInit } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { SseClient, statusesOf } from '../support/sse.js';
import { TestStack } from '../support/stack.js';

const JOB_FIELDS = ['id', 'status', 'created_at', 'started_at', 'completed_at', 'expires_at', 'queue_position', 'progress', 'outputs', 'error', 'metrics', 'urls'];

describe('v2 jobs from submission to download', () => {
  const stack = new TestStack('s3');
  let cloud: Cloud;
  let alice: { id: string; key: string };
  let origin: string;

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack, { api: { SSE_KEEPALIVE_MS: '300' } });
    origin = cloud.api.url;
    alice = await stack.account({ name: 'alice' });
  });
  afterAll(() => stack.close());

  const submit = (body: unknown, headers: Record<string, string> = {}, key = alice.key) =>
    call(`${origin}/api/v2/jobs`, jsonInit('POST', body, bearer(key, headers)));
  const follow = (link: string, init: RequestInit = {}) => call(new URL(link, origin).toString(), init);

  it('runs the text-to-image workflow: submit, watch events, poll, download the PNG', async () => {
    const res = await submit({ workflow: textToImage(11, 8) });
    expect(res.status).toBe(201);
    for (const f of JOB_FIELDS) expect(res.body).toHaveProperty(f);
    // Metrics not yet known are null, not missing.
    expect(Object.keys(res.body.metrics).sort()).toEqual(['execution_ms', 'queue_ms']);
    expect(res.body.metrics.execution_ms).toBeNull();
    if (res.body.status === 'queued') expect(res.body.metrics.queue_ms).toBeNull();
    expect(res.body.urls.self).toBe(`/api/v2/jobs/${res.body.id}`);

    const sse = new SseClient(new URL(res.body.urls.events, origin).toString(), bearer(alice.key));
    await sse.until((events) => statusesOf(events).includes('succeeded'));
    await sse.ended;
    expect(sse.headers!.get('content-type')).toMatch(/^text\/event-stream/);
    expect(sse.headers!.get('x-accel-buffering')).toBe('no');
    for (const e of sse.events) expect(e.id).toMatch(/^\d+-\d+$/);
    expect(new Set(sse.events.map((e) => e.id)).size).toBe(sse.events.length);
    const kinds = new Set(sse.events.map((e) => e.event));
    expect(kinds.has('progress')).toBe(true);
    expect(kinds.has('output')).toBe(true);
    expect(statusesOf(sse.events).at(-1)).toBe('succeeded');
    const progress = sse.events.filter((e) => e.event === 'progress').map((e) => JSON.parse(e.data).value);
    expect(progress.at(-1)).toBe(1);
    const outputEvent = JSON.parse(sse.events.find((e) => e.event === 'output')!.data);
    expect(outputEvent).toMatchObject({ node_id: '9', type: 'image', content_type: 'image/png' });
    expect(outputEvent.url).toMatch(/^http/);

    const job = await follow(res.body.urls.self, { headers: bearer(alice.key) });
    expect(job.status).toBe(200);
    expect(job.body.status).toBe('succeeded');
    expect(job.body.queue_position).toBeNull();
    expect(job.body.metrics.queue_ms).toEqual(expect.any(Number));
    expect(job.body.metrics.execution_ms).toEqual(expect.any(Number));
    expect(job.body.progress.value).toBe(1);
    expect(job.body.started_at).not.toBeNull();
    expect(job.body.completed_at).not.toBeNull();
    expect(job.body.outputs).toHaveLength(1);
    const out = job.body.outputs[0];
    for (const f of ['node_id', 'name', 'type', 'content_type', 'size_bytes', 'id', 'hash', 'url', 'url_expires_at', 'job_id']) expect(out).toHaveProperty(f);
    const download = await fetch(out.url);
    expect(download.status).toBe(200);
    const png = Buffer.from(await download.arrayBuffer());
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    expect(png.length).toBe(out.size_bytes);
    expect(out.hash).toBe(`blake3:${blake3Hex(png)}`);
    // The output is an asset too.
    const asset = await call(`${origin}/api/v2/assets/${out.id}`, { headers: bearer(alice.key) });
    expect(asset.body).toMatchObject({ id: out.id, hash: out.hash, job_id: res.body.id });

    const wf = await follow(`${res.body.urls.self}/workflow`, { headers: bearer(alice.key) });
    expect(wf.body).toEqual({ workflow: textToImage(11, 8), format: 'api' });
    const logs = await follow(res.body.urls.logs, { headers: bearer(alice.key) });
    expect(logs.status).toBe(200);
    expect(logs.body).toEqual({ text: expect.any(String), truncated: false, captured_at: expect.any(String) });
    expect(logs.body.text.length).toBeGreaterThan(0);
  });

  it('stores the images SaveImageWebsocket sends only over the socket as outputs; sampler previews are JPEG previews only', async () => {
    const workflow = { ...textToImage(12, 4), '20': { class_type: 'SaveImageWebsocket', inputs: { images: ['8', 0] } } };
    const res = await submit({ workflow });
    expect(res.status).toBe(201);
    const sse = new SseClient(new URL(res.body.urls.events, origin).toString(), bearer(alice.key));
    await sse.until((events) => statusesOf(events).includes('succeeded'));
    await sse.ended;
    // The sampler's previews come as the engine's sampler sends them: JPEG.
    const previews = sse.events.filter((e) => e.event === 'preview').map((e) => JSON.parse(e.data));
    const sampler = previews.filter((p) => p.node_id === '3');
    expect(sampler.length).toBeGreaterThan(0);
    for (const p of sampler) {
      expect(p.content_type).toBe('image/jpeg');
      expect(Buffer.from(p.data_base64, 'base64').subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    }
    // Both output nodes made an output, each announced once; the sampler's previews are not outputs.
    const announced = sse.events.filter((e) => e.event === 'output').map((e) => JSON.parse(e.data));
    expect(announced.map((o) => o.node_id).sort()).toEqual(['20', '9']);
    const job = await follow(res.body.urls.self, { headers: bearer(alice.key) });
    expect(job.body.status).toBe('succeeded');
    expect(job.body.outputs.map((o: { node_id: string }) => o.node_id).sort()).toEqual(['20', '9']);
    const sent = job.body.outputs.find((o: { node_id: string }) => o.node_id === '20');
    expect(sent).toMatchObject({ type: 'image', content_type: 'image/png', name: '20_images_0.png', job_id: res.body.id });
    expect(announced.find((o) => o.node_id === '20')).toMatchObject({ id: sent.id, hash: sent.hash, size_bytes: sent.size_bytes });
    const bytes = Buffer.from(await (await fetch(sent.url)).arrayBuffer());
    expect(bytes.length).toBe(sent.size_bytes);
    expect(sent.hash).toBe(`blake3:${blake3Hex(bytes)}`);
    // The same picture SaveImage wrote to a file, without its metadata.
    const saved = job.body.outputs.find((o: { node_id: string }) => o.node_id === '9');
    const file = decodePng(Buffer.from(await (await fetch(saved.url)).arrayBuffer()));
    const socketImage = decodePng(bytes);
    expect([socketImage.width, socketImage.height]).toEqual([file.width, file.height]);
    expect(Buffer.from(socketImage.data).equals(Buffer.from(file.data))).toBe(true);
    const asset = await call(`${origin}/api/v2/assets/${sent.id}`, { headers: bearer(alice.key) });
    expect(asset.body).toMatchObject({ id: sent.id, hash: sent.hash, job_id: res.body.id, content_type: 'image/png', created_new: true });
  });

  it('holds the response with Prefer: wait until the job ends', async () => {
    const res = await submit({ workflow: tinyImage(3) }, { prefer: 'wait=20' });
    expect(res.status).toBe(201);
    expect(res.headers.get('preference-applied')).toBe('wait=20');
    expect(res.body.status).toBe('succeeded');
    expect(res.body.outputs).toHaveLength(1);
    // Answered from the job as its run ended it, not read back: the same Job a GET reads, but for
    // the links, signed afresh.
    const got = await follow(res.body.urls.self, { headers: bearer(alice.key) });
    const unsigned = (job: { outputs: Record<string, unknown>[] }) => ({ ...job, outputs: job.outputs.map(({ url: _u, url_expires_at: _e, ...o }) => o) });
    expect(unsigned(res.body)).toEqual(unsigned(got.body));
    const quick = await submit({ workflow: tinyImage(4) });
    expect(quick.body.status).toBe('queued');
    // A wait longer than the cap, in however many digits, is the cap.
    const long = await submit({ workflow: tinyImage(5) }, { prefer: 'wait=1234567' });
    expect(long.headers.get('preference-applied')).toBe('wait=60');
  });

  it('answers 204 for the log of a job that has not ended', async () => {
    const res = await submit({ workflow: textToImage(5, 200) });
    const logs = await follow(res.body.urls.logs, { headers: bearer(alice.key) });
    expect(logs.status).toBe(204);
    await follow(res.body.urls.cancel, { method: 'POST', headers: bearer(alice.key) });
  });

  it('resumes an event stream with Last-Event-ID without losing or repeating an event', async () => {
    const res = await submit({ workflow: textToImage(21, 60) });
    const url = new URL(res.body.urls.events, origin).toString();
    const first = new SseClient(url, bearer(alice.key));
    await first.until((events) => events.filter((e) => e.event === 'progress').length >= 3);
    first.close();
    const resumeAt = first.lastId()!;
    const second = new SseClient(url, bearer(alice.key, { 'last-event-id': resumeAt }));
    await second.until((events) => statusesOf(events).includes('succeeded'));
    await second.ended;
    // Everything the job logged, replayed from the beginning by a third client.
    const all = new SseClient(url, bearer(alice.key, { 'last-event-id': '0-0' }));
    await all.ended;
    const seen = [...first.events.filter((e) => e.id && e.id <= resumeAt), ...second.events].map((e) => e.id);
    const logged = all.events.map((e) => e.id);
    const firstLogged = logged.indexOf(first.events.find((e) => logged.includes(e.id))?.id ?? '');
    expect(new Set(seen).size).toBe(seen.length - (first.events.length - new Set(first.events.map((e) => e.id)).size));
    expect(second.events.every((e) => e.id! > resumeAt)).toBe(true);
    expect(logged.slice(logged.indexOf(resumeAt) + 1)).toEqual(second.events.map((e) => e.id));
    expect(firstLogged).toBeGreaterThanOrEqual(0);
  });

  it('answers a reconnection after the end, or from an id the log never issued, with the final status at once', async () => {
    const res = await submit({ workflow: tinyImage(22) }, { prefer: 'wait=20' });
    expect(res.body.status).toBe('succeeded');
    const url = new URL(res.body.urls.events, origin).toString();
    const whole = new SseClient(url, bearer(alice.key));
    await whole.ended;
    const issued = new Set(whole.events.map((e) => e.id));
    // The final event's own id is what an EventSource sends when it reconnects after the end.
    for (const id of [whole.lastId()!, '9999999999999-0', '1-18446744073709551616', '18446744073709551615-18446744073709551615']) {
      const started = Date.now();
      const again = new SseClient(url, bearer(alice.key, { 'last-event-id': id }));
      await again.ended;
      expect([id, again.status, statusesOf(again.events).at(-1)]).toEqual([id, 200, 'succeeded']);
      expect([id, again.events.every((e) => issued.has(e.id))]).toEqual([id, true]);
      // Not held open until the stream's next look at the job (seconds later).
      expect(Date.now() - started).toBeLessThan(5_000);
    }
  });

  it('gives a waiting job its queue position in the status it replays to a reconnecting client', async () => {
    const frank = await stack.account({ name: 'frank' });
    // The only worker is busy with the first job; the second one waits in the queue.
    const blocker = await submit({ workflow: slowJob(25_000) }, {}, frank.key);
    await waitUntil(async () => (await follow(blocker.body.urls.self, { headers: bearer(frank.key) })).body.status === 'running', 10_000, 'the blocker running');
    const waiting = await submit({ workflow: slowJob(25_000, 1) }, {}, frank.key);
    const polled = await follow(waiting.body.urls.self, { headers: bearer(frank.key) });
    expect([polled.body.status, polled.body.queue_position]).toEqual(['queued', expect.any(Number)]);
    const url = new URL(waiting.body.urls.events, origin).toString();
    // A fresh client gets a snapshot; one resuming from before the job's first event gets the log.
    for (const headers of [{}, { 'last-event-id': '0-0' }] as Record<string, string>[]) {
      const sse = new SseClient(url, bearer(frank.key, headers));
      await sse.until((events) => statusesOf(events).length > 0, 5_000);
      sse.close();
      const first = JSON.parse(sse.events.find((e) => e.event === 'status')!.data);
      expect([headers, first]).toEqual([headers, { status: 'queued', queue_position: polled.body.queue_position }]);
    }
    for (const job of [waiting, blocker]) await follow(job.body.urls.cancel, { method: 'POST', headers: bearer(frank.key) });
  });

  it('gives every event of a stream its own id and a queued job always a position; a resume from any event misses nothing', async () => {
    const gina = await stack.account({ name: 'gina' });
    const blocker = await submit({ workflow: slowJob(25_000) }, {}, gina.key);
    await waitUntil(async () => (await follow(blocker.body.urls.self, { headers: bearer(gina.key) })).body.status === 'running', 10_000, 'the blocker running');
    const ahead = await submit({ workflow: slowJob(25_000, 1) }, {}, gina.key);
    const job = await submit({ workflow: tinyImage(77) }, {}, gina.key);
    expect([job.body.status, job.body.queue_position]).toEqual(['queued', 1]);
    const listed = await follow('/api/v2/jobs?status=queued', { headers: bearer(gina.key) });
    expect(listed.body.data.map((j: { queue_position: unknown }) => j.queue_position).sort()).toEqual([0, 1]);
    const url = new URL(job.body.urls.events, origin).toString();
    const first = new SseClient(url, bearer(gina.key));
    await first.until((events) => statusesOf(events).length > 0, 5_000);
    // The job ahead leaves the queue: the stream tells the new position in an event of its own.
    await follow(ahead.body.urls.cancel, { method: 'POST', headers: bearer(gina.key) });
    await first.until((events) => events.filter((e) => e.event === 'status').length >= 2, 5_000);
    first.close();
    const statuses = first.events.filter((e) => e.event === 'status').map((e) => JSON.parse(e.data));
    expect(statuses).toEqual([{ status: 'queued', queue_position: 1 }, { status: 'queued', queue_position: 0 }]);
    const ids = first.events.map((e) => e.id!);
    expect(new Set(ids).size).toBe(ids.length);
    // Back from each event it had, the snapshot's and the stream's own alike.
    const resumed = ids.map((id) => ({ id, sse: new SseClient(url, bearer(gina.key, { 'last-event-id': id })) }));
    for (const { sse } of resumed) await sse.until((events) => statusesOf(events).length > 0, 5_000);
    await follow(blocker.body.urls.cancel, { method: 'POST', headers: bearer(gina.key) });
    const all = new SseClient(url, bearer(gina.key, { 'last-event-id': '0-0' }));
    await all.ended;
    const logged = all.events.filter((e) => e.event !== 'status' || JSON.parse(e.data).status !== 'queued');
    expect(statusesOf(logged)).toEqual(['running', 'succeeded']);
    for (const { id, sse } of resumed) {
      await sse.ended;
      const got = sse.events.map((e) => e.id!);
      expect([id, new Set(got).size]).toEqual([id, got.length]);
      expect([id, got.includes(id)]).toEqual([id, false]);
      // Every event the job logged after the queue: running, its output, its progress, succeeded.
      for (const e of logged) expect([id, e.event, got.includes(e.id!)]).toEqual([id, e.event, true]);
      for (const e of sse.events.filter((x) => x.event === 'status')) {
        const data = JSON.parse(e.data);
        if (data.status === 'queued') expect([id, data.queue_position]).toEqual([id, 0]);
      }
    }
  });

  it('sends keepalive comments while a job waits', async () => {
    const res = await submit({ workflow: textToImage(31, 100) });
    const sse = new SseClient(new URL(res.body.urls.events, origin).toString(), bearer(alice.key));
    await new Promise((r) => setTimeout(r, 1000));
    expect(sse.comments).toBeGreaterThanOrEqual(2);
    sse.close();
    await follow(res.body.urls.cancel, { method: 'POST', headers: bearer(alice.key) });
  });

  it('lists the caller\'s jobs newest first, page by page, with a status filter', async () => {
    const bob = await stack.account({ name: 'bob' });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await submit({ workflow: tinyImage(i) }, {}, bob.key)).body.id);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await call(`${origin}/api/v2/jobs?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { headers: bearer(bob.key) });
      expect(page.status).toBe(200);
      expect(page.body.limit).toBe(2);
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.data.map((j: { id: string }) => j.id));
      cursor = page.body.has_more ? page.body.next_cursor : undefined;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    // Each listed job is the job as its own URL shows it, outputs included (their signed URLs
    // differ only by when they were signed).
    const unsigned = (job: { outputs: Record<string, unknown>[] }) => ({ ...job, outputs: job.outputs.map(({ url: _u, url_expires_at: _e, ...o }) => o) });
    await waitUntil(async () => (await call(`${origin}/api/v2/jobs?status=succeeded`, { headers: bearer(bob.key) })).body.data.length === 5, 30_000, "bob's jobs succeeded");
    const succeeded = await call(`${origin}/api/v2/jobs?status=succeeded,failed&limit=3`, { headers: bearer(bob.key) });
    expect(succeeded.body.data.map((j: { id: string }) => j.id)).toEqual([...ids].reverse().slice(0, 3));
    for (const listed of succeeded.body.data) {
      expect(listed.outputs.length).toBeGreaterThan(0);
      expect(unsigned(listed)).toEqual(unsigned((await call(`${origin}/api/v2/jobs/${listed.id}`, { headers: bearer(bob.key) })).body));
    }
    const filtered = await call(`${origin}/api/v2/jobs?status=failed,expired`, { headers: bearer(bob.key) });
    expect(filtered.body.data).toEqual([]);
    // Clamped to 100 however large; zero or less selects the default; not a whole number: 400.
    for (const [limit, echoed] of [['1000', 100], ['1000000000000', 100], ['0', 20], ['-1', 20], ['-1000000000000', 20]] as const) {
      const clamped = await call(`${origin}/api/v2/jobs?limit=${limit}`, { headers: bearer(bob.key) });
      expect([limit, clamped.status, clamped.body.limit]).toEqual([limit, 200, echoed]);
    }
    for (const limit of ['1.5', 'ten', '']) expect([limit, (await call(`${origin}/api/v2/jobs?limit=${limit}`, { headers: bearer(bob.key) })).status]).toEqual([limit, 400]);
    const bad = await call(`${origin}/api/v2/jobs?cursor=not-a-cursor`, { headers: bearer(bob.key) });
    expect(bad.status).toBe(400);
    const page = await call(`${origin}/api/v2/jobs?limit=1`, { headers: bearer(bob.key) });
    const foreign = await call(`${origin}/api/v2/jobs?cursor=${encodeURIComponent(page.body.next_cursor)}`, { headers: bearer(alice.key) });
    expect(foreign.status).toBe(400);
    expect(envelopeCode(foreign)).toBe('invalid_request');
    expect((await call(`${origin}/api/v2/jobs?status=nope`, { headers: bearer(bob.key) })).status).toBe(400);
  });

  // The API counts an account's open event streams in this sorted set, one member per stream.
  const openStreams = async (accountId: string) => {
    const redis = new Redis(TEST_REDIS_URL);
    try {
      return await redis.zcard(`${stack.redisPrefix}:streams:${accountId}`);
    } finally {
      redis.disconnect();
    }
  };

  it('gives back the stream slot of a client that leaves while its stream is being opened', async () => {
    const dave = await stack.account({ name: 'dave' });
    await stack.accounts.setLimits(dave.id, { requestsPerMinute: 1_000_000, maxEventStreams: 3 });
    const job = await submit({ workflow: slowJob(25_000) }, {}, dave.key);
    const url = new URL(job.body.urls.events, origin);
    // Each client sends the whole request and is gone 0 to 5 ms later: while the API still looks
    // up the job, while it takes the stream's slot, or just after.
    for (let i = 0; i < 20; i++) {
      await new Promise<void>((resolve) => {
        const socket = net.connect(Number(url.port), url.hostname, () => {
          socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${dave.key}\r\n\r\n`);
          setTimeout(() => socket.destroy(), i % 6);
        });
        socket.on('error', () => undefined);
        socket.on('close', () => resolve());
      });
    }
    // Once the API has seen them all, none of them holds a slot, and the account opens as many
    // streams as its limit allows, counted exactly.
    await new Promise((r) => setTimeout(r, 500));
    await waitUntil(async () => (await openStreams(dave.id)) === 0, 5_000, 'no stream counted after the early disconnects');
    const streams = [0, 1, 2].map(() => new SseClient(url.toString(), bearer(dave.key)));
    for (const sse of streams) await sse.until((events) => events.length > 0, 5_000);
    expect(streams.map((sse) => sse.status)).toEqual([200, 200, 200]);
    expect(await openStreams(dave.id)).toBe(3);
    const fourth = await call(url.toString(), { headers: bearer(dave.key) });
    expect([fourth.status, envelopeCode(fourth)]).toEqual([429, 'too_many_streams']);
    for (const sse of streams) sse.close();
    await waitUntil(async () => (await openStreams(dave.id)) === 0, 5_000, 'no stream counted after the streams closed');
    await follow(job.body.urls.cancel, { method: 'POST', headers: bearer(dave.key) });
  });

  it('ends the stream of a job deleted while it is followed, and gives back its slot', async () => {
    const erin = await stack.account({ name: 'erin' });
    // The only worker is busy with the first job; the second one, followed, waits in the queue.
    const blocker = await submit({ workflow: slowJob(25_000) }, {}, erin.key);
    const followed = await submit({ workflow: slowJob(25_000, 1) }, {}, erin.key);
    const url = new URL(followed.body.urls.events, origin).toString();
    const sse = new SseClient(url, bearer(erin.key));
    await sse.until((events) => statusesOf(events).includes('queued'));
    // As retention does once a job's time is up (its outputs go with it).
    await stack.db.job.delete({ where: { id: followed.body.id } });
    const ended = await Promise.race([sse.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000))]);
    sse.close();
    expect(ended).toBe(true);
    await waitUntil(async () => (await openStreams(erin.id)) === 0, 5_000, 'the ended stream no longer counted');
    const again = await call(url, { headers: bearer(erin.key) });
    expect([again.status, envelopeCode(again)]).toEqual([404, 'not_found']);
    await follow(blocker.body.urls.cancel, { method: 'POST', headers: bearer(erin.key) });
  });
});
