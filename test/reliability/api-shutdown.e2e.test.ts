import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { slowJob } from '../support/cloud.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { bearer, call, jsonInit } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { SseClient, statusesOf } from '../support/sse.js';
import { RouterWorld, eventually, expectRequestId, expectRouterError } from '../router/router-world.js';

/**
 * An API replica stopped with SIGTERM, as a rolling deploy does: what is in flight finishes or is
 * handed on, nothing is lost, and the process leaves within its grace.
 */
const report = new ReliabilityReport('Graceful stop of an API replica', 1.5);
afterAll(() => report.save());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('an API replica stopped with SIGTERM', () => {
  const world = new RouterWorld();
  let redis: Redis;
  let tenant: { id: string; key: string };

  beforeAll(async () => {
    await world.open();
    const engine = await world.stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '20' });
    await world.stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: `w-${world.stack.name}` }, 'ready');
    tenant = await world.stack.account({ tier: 'enterprise' });
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    redis.disconnect();
    await world.close();
  });

  const slotsHeld = (workspaceId: string) => redis.zcard(`${world.stack.redisPrefix}:router:{${workspaceId}}:inflight`);

  /** SIGTERM; resolves with the ms until the process is gone (the helper SIGKILLs after 10 s). */
  async function stopTimed(api: RunningProcess): Promise<number> {
    const at = Date.now();
    await api.stop('SIGTERM');
    expect(api.child.signalCode === 'SIGKILL').toBe(false);
    return Date.now() - at;
  }

  it('lets router calls in flight finish, ends streams and waits so clients move on, and exits', async () => {
    const api = await world.startApi({ API_SHUTDOWN_GRACE_MS: '8000' });
    const workspace = await world.workspace();

    // A running job with an event stream, a WebSocket, a `Prefer: wait` submission, a router call.
    const job = await call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: slowJob(3_000) }, bearer(tenant.key)));
    expect(job.status).toBe(201);
    const stream = new SseClient(`${api.url}/api/v2/jobs/${job.body.id}/events`, bearer(tenant.key));
    await stream.until((events) => statusesOf(events).includes('running'));
    const socket = new WebSocket(`${api.url.replace('http', 'ws')}/ws?clientId=drain&token=${tenant.key}`);
    const socketClosed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
    await new Promise((resolve, reject) => {
      socket.once('message', resolve);
      socket.once('error', reject);
    });
    const waited = call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: slowJob(3_000, 1) }, bearer(tenant.key, { prefer: 'wait=60' })));
    const routedAt = Date.now();
    const routed = world.post(workspace.token, 'openai/gpt-image-1', { model: 'gpt-image-1', prompt: 'in flight at the stop [[slow:1500]]' }, {}, api);
    await eventually(async () => world.sim.requests('openai').some((r) => r.body.includes('in flight at the stop')));
    await sleep(200);

    const stopAt = Date.now();
    const stopped = stopTimed(api);
    const [waitReply, callReply, closeCode, streamEndedMs] = await Promise.all([
      waited.then((r) => ({ r, ms: Date.now() - stopAt })),
      routed.then((r) => ({ r, ms: Date.now() - stopAt })),
      socketClosed,
      stream.ended.then(() => Date.now() - stopAt),
    ]);
    const exitMs = await stopped;

    // The stream ended before the job did, on an id a client resumes from.
    expect(statusesOf(stream.events)).not.toContain('succeeded');
    const resumeFrom = stream.lastId();
    expect(resumeFrom).not.toBeNull();
    // `Prefer: wait` answered at once with the job as it stood.
    expect(waitReply.r.status).toBe(201);
    expect(['queued', 'running']).toContain(waitReply.r.body.status);
    expect(waitReply.ms).toBeLessThan(2_000);
    expect(streamEndedMs).toBeLessThan(2_000);
    expect(closeCode).toBe(1012);
    // The router call ran to its end at the partner, and everything about it was written.
    expect(callReply.r.status).toBe(200);
    // Not cut at the stop: its answer came after the partner's 1.5 s (however late the stop fell in them).
    expect(stopAt - routedAt + callReply.ms).toBeGreaterThanOrEqual(1_500);
    const row = await world.stack.db.routerCall.findUnique({ where: { id: expectRequestId(callReply.r) } });
    expect(row).toMatchObject({ outcome: 'success', resultBucket: 'success', charged: true });
    expect(await slotsHeld(workspace.id)).toBe(0);
    expect(exitMs).toBeLessThan(5_000);

    // The stream's client resumes on another replica and misses nothing up to the end.
    const resumed = new SseClient(`${world.api.url}/api/v2/jobs/${job.body.id}/events`, bearer(tenant.key, { 'last-event-id': resumeFrom! }));
    await resumed.until((events) => statusesOf(events).includes('succeeded'));
    const ids = [...stream.events, ...resumed.events].map((e) => e.id).filter((id) => id !== null);
    expect(new Set(ids).size).toBe(ids.length);
    resumed.close();
    stream.close();
    socket.terminate();

    report.record({
      tried: 'SIGTERM under a router call, an event stream, a WebSocket and a `Prefer: wait` submission',
      count: 1,
      outcome: `call finished (200 after ${callReply.ms} ms) and recorded, slot released; stream ended after ${streamEndedMs} ms and resumed elsewhere to the end; WebSocket closed 1012; wait answered in ${waitReply.ms} ms; exit after ${exitMs} ms`,
      held: true,
    });
  });

  it('makes calls still waiting at the end of the grace answer deadline_exceeded, records them, frees their slots; a keyed retry collects', async () => {
    const api = await world.startApi({ API_SHUTDOWN_GRACE_MS: '1000' });
    const workspace = await world.workspace();
    const slow = world.post(workspace.token, 'openai/gpt-image-1', { model: 'gpt-image-1', prompt: 'outlives the grace [[hang]]' }, {}, api);
    const videoBody = { model: 'ray-2', prompt: 'a render that outlives the grace [[slow:3000]]', duration: '5s' };
    const keyed = world.post(workspace.token, 'luma/ray-2', videoBody, { 'idempotency-key': 'stop-001' }, api);
    await eventually(async () => world.sim.requests('openai').some((r) => r.body.includes('outlives the grace')));
    await eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: workspace.id, idempotencyKey: 'stop-001', providerHandle: { not: null } } }));

    const stopAt = Date.now();
    const stopped = stopTimed(api);
    const [plain, video] = await Promise.all([slow, keyed]);
    const answeredMs = Date.now() - stopAt;
    const exitMs = await stopped;

    expectRouterError(plain, 504, 'deadline_exceeded');
    expect(plain.body.detail).toMatch(/shutting down/);
    expect(plain.headers.get('retry-after')).toBeNull();
    expectRouterError(video, 504, 'deadline_exceeded');
    expect(Number(video.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(answeredMs).toBeLessThan(3_000);
    expect(exitMs).toBeLessThan(4_000);

    // Written before the process left: the abandoned call, and the keyed one still collectable.
    const plainRow = await world.stack.db.routerCall.findUnique({ where: { id: expectRequestId(plain) } });
    expect(plainRow).toMatchObject({ outcome: 'deadline_exceeded', resultBucket: null, charged: false });
    const videoRow = await world.stack.db.routerCall.findUnique({ where: { id: expectRequestId(video) } });
    expect(videoRow).toMatchObject({ outcome: 'deadline_exceeded', state: 'running', idempotencyKey: 'stop-001' });
    expect(videoRow!.providerHandle).toBeTruthy();
    expect(await slotsHeld(workspace.id)).toBe(0);

    // The retry, on the replica still up, collects the generation instead of dispatching another.
    await sleep(2_500);
    const retry = await world.post(workspace.token, 'luma/ray-2', videoBody, { 'idempotency-key': 'stop-001' });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body.id).toBe(videoRow!.providerHandle);
    expect(world.sim.requests('luma', { method: 'POST' }).filter((r) => r.body.includes('outlives the grace'))).toHaveLength(1);

    report.record({
      tried: 'SIGTERM with router calls outlasting API_SHUTDOWN_GRACE_MS (1 s)',
      count: 2,
      outcome: `both answered 504 deadline_exceeded ${answeredMs} ms after the signal (Retry-After on the keyed one), recorded, slots freed; exit after ${exitMs} ms; the keyed retry collected the one generation`,
      held: true,
    });
  });
});
