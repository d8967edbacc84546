import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { Redis } from 'ioredis';
import { mintRouterToken } from '#libs/auth';
import { JobEventLog, compareStreamIds, eventIdOf, jobKeys } from '#libs/jobs';
import { startCloud, textToImage, tinyImage } from '../support/cloud.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { bearer, call, jsonInit } from '../support/http.js';
import { memoryMiB, type RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { SseClient } from '../support/sse.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';
import { startPartnerSim, type PartnerSim } from '../../apps/partner-sim/src/server.js';
import { writeCatalog } from '../router/router-world.js';
import { V1Socket } from '../v1/v1-world.js';

/**
 * Load held on this machine, all at once: a steady stream of submissions, thousands of SSE and
 * WebSocket clients following running jobs, and bursts of router calls at the concurrency limit.
 * `npm run soak` runs the same for longer (LOAD_SECONDS).
 */
const SECONDS = Number(process.env.LOAD_SECONDS ?? 60);
const RATE = Number(process.env.LOAD_RATE ?? 200);
const SSE_CLIENTS = 2000;
const WS_CLIENTS = 500;
const ROUTER_PARALLEL = 50;
const ROUTER_LIMIT = 10;
const STEPS = 12;
const SOAK = SECONDS > 60;

const report = new ReliabilityReport(SOAK ? 'Soak' : 'Load', SOAK ? 9 : 3);
afterAll(() => report.save());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};
const ms = (x: number) => `${Math.round(x)} ms`;
const mib = (p: RunningProcess, field: 'VmRSS' | 'VmHWM') => Math.round(memoryMiB(p.child.pid!, field));

describe(`load: ${RATE} submissions/s for ${SECONDS} s with ${SSE_CLIENTS} SSE, ${WS_CLIENTS} WebSocket clients and router bursts`, () => {
  const stack = new TestStack('local');
  let sim: PartnerSim;
  let api: RunningProcess;
  let worker: RunningProcess;
  let engine: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    sim = await startPartnerSim({ timeScale: 0.005 });
    const cloud = await startCloud(stack, { engine: { SIM_STEP_MS: '15' }, api: { ROUTER_CATALOG_FILE: writeCatalog(stack.blobDir), ...sim.routerEnv() } });
    ({ api } = cloud);
    [worker] = cloud.workers as [RunningProcess];
    [engine] = cloud.engines as [RunningProcess];
  }, 60_000);
  afterAll(async () => {
    await sim?.stop();
    await stack.close();
  });

  it('holds: no submission error, every progress event to every client, no router limit exceeded', async () => {
    // Submitters: several tenants, so no single account's queue limit is what is being measured.
    const tenants = await Promise.all(Array.from({ length: 6 }, () => stack.account({ tier: 'enterprise' })));
    for (const t of tenants) await stack.accounts.setLimits(t.id, { maxQueuedJobs: 100_000 });
    const watcher = await stack.account({ tier: 'enterprise' });
    const v1 = await stack.account({ tier: 'enterprise' });
    const router = await stack.account();
    await stack.accounts.setLimits(router.id, { routerEnabled: true, routerMaxConcurrent: ROUTER_LIMIT, routerSpendCapCents: 10_000_000, routerWindowCalls: 1_000_000, routerWindowSeconds: 3600 });
    const routerToken = await mintRouterToken(TEST_ROUTER_SECRET, router.id);

    // 500 WebSocket clients of one account: each must see every progress message of its prompts.
    const sockets: V1Socket[] = [];
    for (let i = 0; i < WS_CLIENTS; i += 50) {
      sockets.push(
        ...(await Promise.all(
          Array.from({ length: 50 }, async () => {
            const s = new V1Socket(new WebSocket(`${api.url.replace('http', 'ws')}/ws?clientId=${randomUUID()}&token=${v1.key}`));
            await s.opened;
            return s;
          }),
        )),
      );
    }

    // A replica that sheds load answers 503 with Retry-After, in its surface's error shape (v2's
    // `error.code`, the router's `error_type`), and runs nothing: a client waits and sends the same
    // request again (an Idempotency-Key is still free), as real clients do.
    const shed = { submissions: 0, router: 0 };
    const sendUntilServed = async (kind: keyof typeof shed, url: string, init: RequestInit) => {
      for (;;) {
        const r = await call(url, { ...init, signal: AbortSignal.timeout(30_000) });
        const code = r.body?.error?.code ?? r.body?.error_type;
        if (r.status !== 503 || code !== 'service_unavailable' || !r.headers.get('retry-after')) return r;
        shed[kind]++;
        await sleep(Number(r.headers.get('retry-after')) * 1000);
      }
    };
    const started = Date.now();
    const until = started + SECONDS * 1000;
    const latencies: number[] = [];
    const failures = new Map<string, number>();
    let sent = 0;

    // Open loop: submission i leaves at started + i/RATE s, however long earlier ones take.
    const inFlight = new Set<Promise<void>>();
    const submitter = (async () => {
      while (Date.now() < until) {
        const due = Math.floor(((Date.now() - started) / 1000) * RATE);
        while (sent < due) {
          const i = sent++;
          const tenant = tenants[i % tenants.length]!;
          const t0 = performance.now();
          const p = sendUntilServed('submissions', `${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(i % 251) }, bearer(tenant.key, { 'idempotency-key': randomUUID() })))
            .then((r) => {
              latencies.push(performance.now() - t0);
              if (r.status !== 201) failures.set(String(r.status), (failures.get(String(r.status)) ?? 0) + 1);
            })
            .catch((err: Error) => void failures.set(err.name, (failures.get(err.name) ?? 0) + 1))
            .finally(() => inFlight.delete(p));
          inFlight.add(p);
        }
        await sleep(5);
      }
      await Promise.all(inFlight);
    })();

    // Jobs followed by 2,000 SSE clients (100 each), submitted through the run.
    const watchedJobs = Math.max(1, SSE_CLIENTS / 100);
    const followers: { jobId: string; client: SseClient }[] = [];
    const watch = (async () => {
      for (let j = 0; j < watchedJobs; j++) {
        const r = await sendUntilServed('submissions', `${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: textToImage(1000 + j, STEPS) }, bearer(watcher.key)));
        if (r.status !== 201) throw new Error(`watched job refused: ${r.status} ${r.text}`);
        for (let c = 0; c < 100; c++) followers.push({ jobId: r.body.id, client: new SseClient(`${api.url}/api/v2/jobs/${r.body.id}/events`, bearer(watcher.key)) });
        await sleep((SECONDS * 1000 * 0.7) / watchedJobs);
      }
    })();

    // v1 prompts every few seconds, followed by every socket of the account.
    const prompts: string[] = [];
    const v1Prompts = (async () => {
      while (Date.now() < until - 8000) {
        const r = await sendUntilServed('submissions', `${api.url}/api/prompt`, { method: 'POST', headers: { 'x-api-key': v1.key, 'content-type': 'application/json' }, body: JSON.stringify({ prompt: textToImage(5000 + prompts.length, STEPS) }) });
        if (r.status !== 200) throw new Error(`v1 prompt refused: ${r.status} ${r.text}`);
        prompts.push(r.body.prompt_id);
        await sleep(6000);
      }
    })();

    // Bursts of 50 parallel router calls against a limit of 10 concurrent calls; shed calls are sent
    // again, as submissions are.
    const routerLatencies: number[] = [];
    const routerOutcomes = new Map<number, number>();
    let routerPeak = 0;
    let bursts = 0;
    const routerLoad = (async () => {
      while (Date.now() < until - 5000) {
        sim.resetStats();
        await Promise.all(
          Array.from({ length: ROUTER_PARALLEL }, async (_, i) => {
            const t0 = performance.now();
            const r = await sendUntilServed('router', `${api.url}/v1/models/openai/gpt-image-1`, jsonInit('POST', { model: 'gpt-image-1', prompt: `burst ${bursts} #${i} [[slow:300]]` }, bearer(routerToken)));
            routerLatencies.push(performance.now() - t0);
            routerOutcomes.set(r.status, (routerOutcomes.get(r.status) ?? 0) + 1);
          }),
        );
        routerPeak = Math.max(routerPeak, sim.maxInFlight('openai'));
        bursts++;
        await sleep(5000);
      }
    })();

    await Promise.all([submitter, watch, v1Prompts, routerLoad]);
    // The open loop sent at the target rate; how long after the window the last answer came shows whether the API kept up.
    const drainMs = Date.now() - until;

    // Every follower's stream ends with its job; every v1 prompt ends on every socket.
    await Promise.all(followers.map((f) => f.client.until((events) => events.some((e) => e.event === 'status' && /succeeded|failed/.test(e.data)), 180_000)));
    await Promise.all(sockets.map((s) => Promise.all(prompts.map((p) => s.ended(p, 180_000)))));
    const ran = await stack.db.job.count({ where: { accountId: { in: tenants.map((t) => t.id) }, status: 'succeeded' } });
    const memory = { api: [mib(api, 'VmRSS'), mib(api, 'VmHWM')], worker: [mib(worker, 'VmRSS'), mib(worker, 'VmHWM')], engine: [mib(engine, 'VmRSS'), mib(engine, 'VmHWM')] };

    // SSE: each client got every progress event logged after it connected, once; lag = receipt - log time.
    const redis = new Redis(TEST_REDIS_URL);
    const log = new JobEventLog(redis, jobKeys(stack.redisPrefix), 3_600_000);
    const logged = new Map<string, string[]>();
    // Logged events go out under their wire ids (eventIdOf).
    for (const jobId of new Set(followers.map((f) => f.jobId))) logged.set(jobId, (await log.since(jobId)).filter((e) => e.event === 'progress').map((e) => eventIdOf(e.id)));
    redis.disconnect();
    let sseMissing = 0;
    let sseProgress = 0;
    for (const { jobId, client } of followers) {
      const ids = logged.get(jobId)!;
      const received = client.events.filter((e) => e.event === 'progress' && e.id !== null).map((e) => e.id!);
      const got = new Set(received);
      // On connect a client gets the latest progress logged so far (under its own id), then every
      // one logged after it: from the first it received on, it must have them all.
      const from = [...received].sort(compareStreamIds)[0];
      const expected = from ? ids.filter((id) => compareStreamIds(id, from) >= 0) : ids.filter((id) => compareStreamIds(id, client.events[0]?.id ?? '0-0') > 0);
      sseMissing += expected.filter((id) => !got.has(id)).length;
      sseProgress += got.size;
      client.close();
    }
    // WebSocket: every socket saw the same, complete progress of every prompt.
    let wsShort = 0;
    let wsProgress = 0;
    for (const s of sockets) {
      for (const p of prompts) {
        const n = s.texts(p).filter((m) => m.type === 'progress').length;
        wsProgress += n;
        if (n < STEPS) wsShort++;
      }
      s.close();
    }
    const routerOk = routerOutcomes.get(200) ?? 0;
    const routerRefused = routerOutcomes.get(429) ?? 0;
    const routerOther = [...routerOutcomes].filter(([s]) => s !== 200 && s !== 429).reduce((a, [, n]) => a + n, 0);
    const failed = [...failures.values()].reduce((a, b) => a + b, 0);
    const answered = latencies.length + failed;

    const figures = [
      `submissions: ${sent} sent at ${RATE}/s over ${SECONDS} s, ${answered} answered, the last ${ms(drainMs)} after the window; ${shed.submissions} shed with 503 and sent again; errors ${failed}${failed ? ` (${[...failures].map(([k, n]) => `${k}×${n}`).join(', ')})` : ''}; p50 ${ms(pct(latencies, 0.5))}, p95 ${ms(pct(latencies, 0.95))}, p99 ${ms(pct(latencies, 0.99))}, max ${ms(pct(latencies, 1))}`,
      `worker: ${ran} of the submitted jobs ran to success meanwhile (${(ran / SECONDS).toFixed(0)}/s on one worker; the rest wait in the queue)`,
      `SSE: ${followers.length} clients on ${logged.size} jobs, ${sseProgress} progress events delivered, ${sseMissing} missed`,
      `WebSocket: ${sockets.length} clients × ${prompts.length} prompts, ${wsProgress} progress messages delivered, ${wsShort} prompt views incomplete`,
      `router: ${bursts} bursts of ${ROUTER_PARALLEL} at limit ${ROUTER_LIMIT}: ${routerOk} ok, ${routerRefused} refused 429, ${routerOther} other (${JSON.stringify([...routerOutcomes].filter(([st]) => st !== 200 && st !== 429))}); ${shed.router} shed with 503 and sent again; peak in flight at the partner ${routerPeak}; p50 ${ms(pct(routerLatencies, 0.5))}, p99 ${ms(pct(routerLatencies, 0.99))}`,
      `memory RSS/peak MiB: api ${memory.api.join('/')}, worker ${memory.worker.join('/')}, sim-engine ${memory.engine.join('/')}`,
    ];
    console.log(figures.join('\n'));

    report.record({ tried: `${RATE} submissions/s for ${SECONDS} s (open loop, 6 tenants)`, count: latencies.length, outcome: `${answered} answered, ${failed} errors, last answer ${ms(drainMs)} after the window; p50 ${ms(pct(latencies, 0.5))}, p95 ${ms(pct(latencies, 0.95))}, p99 ${ms(pct(latencies, 0.99))}`, held: failed === 0 && answered === sent && drainMs < 10_000 });
    report.record({ tried: `${SSE_CLIENTS} concurrent SSE clients following ${logged.size} running jobs`, count: followers.length, outcome: `${sseProgress} progress events delivered, ${sseMissing} missed`, held: sseMissing === 0 && followers.length === SSE_CLIENTS });
    report.record({ tried: `${WS_CLIENTS} v1 WebSocket clients of one account following its prompts`, count: sockets.length, outcome: `${prompts.length} prompts, ${wsProgress} progress messages delivered, ${wsShort} incomplete`, held: wsShort === 0 && sockets.length === WS_CLIENTS });
    report.record({ tried: `${ROUTER_PARALLEL} parallel router calls at a limit of ${ROUTER_LIMIT}, repeated during the load`, count: bursts * ROUTER_PARALLEL, outcome: `${routerOk} ok, ${routerRefused} refused 429, ${routerOther} other; peak in flight ${routerPeak}; p50 ${ms(pct(routerLatencies, 0.5))}, p99 ${ms(pct(routerLatencies, 0.99))}`, held: routerPeak <= ROUTER_LIMIT && routerOther === 0 });
    report.record({ tried: 'memory of each process during the load (RSS now / peak)', count: 3, outcome: `api ${memory.api.join('/')} MiB, worker ${memory.worker.join('/')} MiB, sim-engine ${memory.engine.join('/')} MiB`, held: memory.api[1]! < 1024 && memory.worker[1]! < 512 && memory.engine[1]! < 512 });

    expect(failures).toEqual(new Map());
    expect(sent).toBeGreaterThanOrEqual(RATE * SECONDS * 0.99);
    expect(answered).toBe(sent);
    expect(drainMs).toBeLessThan(10_000);
    expect(followers).toHaveLength(SSE_CLIENTS);
    expect(sseMissing).toBe(0);
    expect(sockets).toHaveLength(WS_CLIENTS);
    expect(prompts.length).toBeGreaterThanOrEqual(1);
    expect(wsShort).toBe(0);
    expect(bursts).toBeGreaterThanOrEqual(1);
    expect(routerPeak).toBeLessThanOrEqual(ROUTER_LIMIT);
    expect(routerOk).toBeGreaterThanOrEqual(ROUTER_LIMIT);
    expect(routerOther).toBe(0);
  }, (SECONDS + 300) * 1000);
});
