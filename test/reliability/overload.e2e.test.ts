import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import WebSocket from 'ws';
import { mintRouterToken } from '#libs/auth';
import { acceptQueueLength } from '../../apps/api/src/http/accept-queue.js';
import { slowJob, startCloud, tinyImage } from '../support/cloud.js';
import { bearer, call, jsonInit, type Reply } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { SseClient, statusesOf } from '../support/sse.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';
import { V1Socket } from '../v1/v1-world.js';

/**
 * An API replica given far more than it can serve, on a machine whose two cores are kept busy by
 * other processes: it must answer every request (served, or refused with 503 and Retry-After in
 * its surface's shape), drop no connection, keep /healthz answering, say it is not ready while it
 * sheds, leave open streams alone, and serve normally again once the pressure ends. The API runs
 * on its default thresholds but two, lowered so that the burst overloads it on any machine.
 */
const RATE = 400; // requests/s offered: three to four times what the API serves with its cores taken
const SECONDS = 10;
const CLIENT_TIMEOUT_MS = 30_000; // as the load suite's client

const report = new ReliabilityReport('Overload', 2.8);
afterAll(() => report.save());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? 0;

type Surface = 'v2' | 'v1' | 'router';

interface Outcome {
  surface: Surface;
  /** HTTP status, or null when no answer came (a connection error or the client's timeout). */
  status: number | null;
  ms: number;
  /** Whether a 503 came in its surface's shape, with Retry-After. */
  wellFormed503?: boolean;
  overloaded?: boolean;
  error?: string;
}

/** The 503 of each surface: the envelope on v2 and v1, `{detail, error_type}` on the router; Retry-After on all. */
function wellFormed503(surface: Surface, r: Reply): boolean {
  if (!/^[1-9]\d*$/.test(r.headers.get('retry-after') ?? '')) return false;
  if (surface === 'router') return r.body?.error_type === 'service_unavailable' && typeof r.body.detail === 'string' && r.headers.get('x-service-error-type') === 'service_unavailable';
  return r.body?.error?.code === 'service_unavailable' && typeof r.body.error.message === 'string';
}

/** Busy loops, one per core: other work on the machine. Ended by their pids. */
function burnCores(n: number): ChildProcess[] {
  return Array.from({ length: n }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

/** `http_requests_shed_total` by its `reason` label. */
function shedByReason(metricsText: string): Map<string, number> {
  const byReason = new Map<string, number>();
  for (const line of metricsText.split('\n')) {
    const m = /^http_requests_shed_total\{reason="([^"]+)"\} (\d+)/.exec(line);
    if (m) byReason.set(m[1]!, Number(m[2]));
  }
  return byReason;
}

describe('overload: a burst far above capacity while other processes keep both cores busy', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;
  let burners: ChildProcess[] = [];

  beforeAll(async () => {
    await stack.open();
    // Keepalive comments every second show an open event stream still flowing through the pressure.
    // Low thresholds, so that the burst overloads this replica whatever the machine's speed today.
    const limits = { OVERLOAD_MAX_REQUESTS_IN_FLIGHT: '24', OVERLOAD_MAX_ACCEPT_QUEUE: '32' };
    ({ api } = await startCloud(stack, { engine: { SIM_STEP_MS: '15' }, api: { SSE_KEEPALIVE_MS: '1000', ...limits } }));
  }, 60_000);
  afterAll(async () => {
    for (const b of burners) if (b.exitCode === null) b.kill('SIGKILL');
    await stack.close();
  });

  it('answers every request (served or 503 with Retry-After), drops no connection, keeps probes and open streams, and recovers', async () => {
    const tenant = await stack.account({ tier: 'enterprise' });
    await stack.accounts.setLimits(tenant.id, { maxQueuedJobs: 100_000 });
    const v1 = await stack.account({ tier: 'enterprise' });
    await stack.accounts.setLimits(v1.id, { maxQueuedJobs: 100_000 });
    const router = await stack.account();
    await stack.accounts.setLimits(router.id, { routerEnabled: true });
    const routerToken = await mintRouterToken(TEST_ROUTER_SECRET, router.id);

    // Streams opened before the pressure: an SSE client on a job that runs through it, a v1 socket.
    const followed = await call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: slowJob(SECONDS * 1000 + 5000) }, bearer(tenant.key)));
    expect(followed.status).toBe(201);
    const sse = new SseClient(`${api.url}/api/v2/jobs/${followed.body.id}/events`, bearer(tenant.key));
    const socket = new V1Socket(new WebSocket(`${api.url.replace('http', 'ws')}/ws?clientId=${randomUUID()}&token=${v1.key}`));
    await socket.opened;
    let sseClosedEarly = false;
    void sse.ended.then(() => (sseClosedEarly = !statusesOf(sse.events).some((status) => /succeeded|failed|canceled/.test(status))));
    let socketClosed = false;
    socket.ws.once('close', () => (socketClosed = true));
    await sse.until((events) => events.length > 0, 10_000);

    // This client shares the busy cores too: how late its own loop ran is part of every latency it measures.
    const clientLag = monitorEventLoopDelay({ resolution: 10 });
    clientLag.enable();
    burners = burnCores(2);
    // The kernel's queue of connections not yet accepted, as the API itself reads it.
    let acceptQueuePeak = 0;
    const acceptSampler = setInterval(() => void acceptQueueLength(api.port).then((n) => (acceptQueuePeak = Math.max(acceptQueuePeak, n ?? 0))), 250);
    const commentsBefore = sse.comments;

    // Readiness while it sheds: asked as soon as a refusal comes back (the replica sheds for at
    // least a sample, so the answer is about the same pressure), one question at a time.
    const probes = { healthz: [] as { status: number | null; ms: number }[], readyz: [] as { status: number | null; load: string }[] };
    let askingReadiness = false;
    const askReadiness = () => {
      if (askingReadiness) return;
      askingReadiness = true;
      void call(`${api.url}/readyz`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) })
        .then(
          (r) => probes.readyz.push({ status: r.status, load: r.body?.checks?.load ?? '-' }),
          () => probes.readyz.push({ status: null, load: 'no answer' }),
        )
        .finally(() => (askingReadiness = false));
    };

    const requests: Promise<Outcome>[] = [];
    const send = (surface: Surface, i: number): Promise<Outcome> => {
      const t0 = performance.now();
      const signal = AbortSignal.timeout(CLIENT_TIMEOUT_MS);
      const answer =
        surface === 'v2'
          ? call(`${api.url}/api/v2/jobs`, { ...jsonInit('POST', { workflow: tinyImage(i % 251) }, bearer(tenant.key, { 'idempotency-key': randomUUID() })), signal })
          : surface === 'v1'
            ? call(`${api.url}/api/prompt`, { ...jsonInit('POST', { prompt: tinyImage(i % 251) }, { 'x-api-key': v1.key }), signal })
            : call(`${api.url}/v1/models`, { headers: bearer(routerToken), signal });
      return answer.then(
        (r) => {
          if (r.status === 503) askReadiness();
          return {
            surface,
            status: r.status,
            ms: performance.now() - t0,
            ...(r.status === 503 ? { wellFormed503: wellFormed503(surface, r), overloaded: /overloaded/.test(r.body?.error?.message ?? r.body?.detail ?? '') } : {}),
          };
        },
        (err: Error & { cause?: { code?: string } }) => ({ surface, status: null, ms: performance.now() - t0, error: `${err.name}${err.cause?.code ? ` ${err.cause.code}` : ''}` }),
      );
    };

    // Liveness all along, every 250 ms.
    let probing = true;
    const probeLoop = (async () => {
      while (probing) {
        const t0 = performance.now();
        const alive = await call(`${api.url}/healthz`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) }).catch(() => null);
        probes.healthz.push({ status: alive?.status ?? null, ms: performance.now() - t0 });
        await sleep(250);
      }
    })();

    // Open loop: request i leaves at i/RATE s, however long the earlier ones take.
    const started = Date.now();
    for (let sent = 0; Date.now() - started < SECONDS * 1000; await sleep(5)) {
      const due = Math.floor(((Date.now() - started) / 1000) * RATE);
      for (; sent < due; sent++) requests.push(send(sent % 10 === 0 ? 'v1' : sent % 10 === 1 ? 'router' : 'v2', sent));
    }
    const outcomes = await Promise.all(requests);
    const commentsDuring = sse.comments - commentsBefore;
    clientLag.disable();
    clearInterval(acceptSampler);
    for (const b of burners) b.kill('SIGKILL');
    probing = false;
    await probeLoop;

    // Once the pressure is over: ready again, and serving, as a client that honours Retry-After sees it.
    const recoveryStarted = Date.now();
    let ready: Reply | null = null;
    let after: Reply | null = null;
    let v1After: Reply | null = null;
    while (Date.now() - recoveryStarted < 30_000) {
      ready = await call(`${api.url}/readyz`);
      if (ready.status === 200) {
        after = await call(`${api.url}/api/v2/jobs`, jsonInit('POST', { workflow: tinyImage(7) }, bearer(tenant.key)));
        v1After = await call(`${api.url}/api/prompt`, jsonInit('POST', { prompt: tinyImage(8) }, { 'x-api-key': v1.key }));
        if (after.status === 201 && v1After.status === 200) break;
      }
      await sleep(1000 * Number((after ?? ready).headers.get('retry-after') ?? 1));
    }
    const recoveredMs = Date.now() - recoveryStarted;
    // The open socket still carries its account's news (the prompts it queued run now); the open
    // stream ends with its job.
    const seen = socket.messages.length;
    const socketAlive = await socket.waitFor((m) => socket.messages.indexOf(m) >= seen && m.kind === 'text', 30_000).then(() => true, () => false);
    await sse.until((events) => statusesOf(events).some((s) => /succeeded|failed/.test(s)), 30_000).catch(() => undefined);
    const sseFinal = statusesOf(sse.events).pop();
    const metricsText = (await call(`${api.url}/metrics`)).text;
    const shedReasons = shedByReason(metricsText);
    const shedMetric = [...shedReasons.values()].reduce((a, b) => a + b, 0);
    sse.close();
    socket.close();

    const noAnswer = outcomes.filter((o) => o.status === null);
    const served = outcomes.filter((o) => o.status !== null && o.status < 300);
    const shed = outcomes.filter((o) => o.status === 503);
    const other = outcomes.filter((o) => o.status !== null && o.status >= 300 && o.status !== 503);
    const bySurface = (['v2', 'v1', 'router'] as const).map((s) => `${s} ${outcomes.filter((o) => o.surface === s && o.status !== null && o.status < 300).length}/${outcomes.filter((o) => o.surface === s && o.status === 503).length}`);
    const latencies = outcomes.filter((o) => o.status !== null).map((o) => o.ms);
    const healthzMs = probes.healthz.map((p) => p.ms);
    const notReady = probes.readyz.filter((p) => p.status === 503 && p.load.startsWith('error: '));
    const errors = new Map<string, number>();
    for (const o of noAnswer) errors.set(o.error!, (errors.get(o.error!) ?? 0) + 1);
    const figures = [
      `requests: ${outcomes.length} sent at ${RATE}/s for ${SECONDS} s with both cores busy; ${outcomes.length - noAnswer.length} answered: ${served.length} served, ${shed.length} shed 503 (${shed.filter((o) => o.wellFormed503).length} well-formed), ${other.length} other; ${noAnswer.length} without an answer${errors.size ? ` (${[...errors].map(([k, n]) => `${k}×${n}`).join(', ')})` : ''}`,
      `by surface (served/shed): ${bySurface.join(', ')}; shed counter ${shedMetric} (${[...shedReasons].map(([r, n]) => `${r} ${n}`).join(', ')}); accept queue peak ${acceptQueuePeak}`,
      `latency at the client: p50 ${Math.round(pct(latencies, 0.5))} ms, p99 ${Math.round(pct(latencies, 0.99))} ms, max ${Math.round(pct(latencies, 1))} ms (the client's own event loop ran up to ${Math.round(clientLag.max / 1e6)} ms late, ${Math.round(clientLag.mean / 1e6)} ms on average)`,
      `healthz: ${probes.healthz.filter((p) => p.status === 200).length}/${probes.healthz.length} answered 200, max ${Math.round(pct(healthzMs, 1))} ms; readyz: ${notReady.length}/${probes.readyz.length} not ready on load (${notReady[0]?.load ?? '-'})`,
      `open streams: SSE ${commentsDuring} keepalives during the burst, final status ${sseFinal}, closed early ${sseClosedEarly}; v1 socket closed ${socketClosed}, carried messages after it ${socketAlive}`,
      `recovery: ready and serving ${recoveredMs} ms after the pressure ended (v2 ${after?.status}, v1 ${v1After?.status})`,
    ];
    console.log(figures.join('\n'));
    report.record({
      tried: `${RATE} requests/s for ${SECONDS} s on v2, v1 and the router while two busy processes take both cores (24 requests in flight, 32 waiting connections)`,
      count: outcomes.length,
      outcome: `${outcomes.length - noAnswer.length} answered (${served.length} served, ${shed.length} shed with 503 + Retry-After: ${[...shedReasons].map(([r, n]) => `${r} ${n}`).join(', ')}), ${other.length} other, ${noAnswer.length} unanswered; at the client p99 ${Math.round(pct(latencies, 0.99))} ms, max ${Math.round(pct(latencies, 1))} ms (its own loop up to ${Math.round(clientLag.max / 1e6)} ms late); accept queue peak ${acceptQueuePeak}`,
      held: noAnswer.length === 0 && other.length === 0 && shed.length > 0 && shed.every((o) => o.wellFormed503),
    });
    report.record({
      tried: 'probes and open streams during that burst',
      count: probes.healthz.length + probes.readyz.length + 2,
      outcome: `healthz 200 ${probes.healthz.filter((p) => p.status === 200).length}/${probes.healthz.length} (max ${Math.round(pct(healthzMs, 1))} ms), readyz not ready ${notReady.length}/${probes.readyz.length}; SSE and WebSocket open throughout (${commentsDuring} keepalives), ready and serving again after ${recoveredMs} ms`,
      held: probes.healthz.every((p) => p.status === 200) && notReady.length > 0 && !sseClosedEarly && !socketClosed && ready?.status === 200 && after?.status === 201,
    });

    expect(errors).toEqual(new Map());
    expect(other.map((o) => `${o.surface} ${o.status}`)).toEqual([]);
    expect(shed.length).toBeGreaterThan(0);
    expect(shed.filter((o) => !o.wellFormed503)).toEqual([]);
    expect(shed.filter((o) => o.overloaded).length).toBe(shedMetric);
    expect(probes.healthz.filter((p) => p.status !== 200)).toEqual([]);
    expect(notReady.length).toBeGreaterThan(0);
    expect(commentsDuring).toBeGreaterThan(0);
    expect({ sseClosedEarly, socketClosed }).toEqual({ sseClosedEarly: false, socketClosed: false });
    expect(ready?.status).toBe(200);
    expect(ready?.body.checks.load).toBe('ok');
    expect([after?.status, v1After?.status, socketAlive]).toEqual([201, 200, true]);
    expect(sseFinal).toBe('succeeded');
  }, 120_000);
});

describe('readiness and the in-flight limit', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    // One request in flight is the limit; short samples so the start's grace period ends quickly.
    api = await stack.startApi({ OVERLOAD_MAX_REQUESTS_IN_FLIGHT: '1', OVERLOAD_RETRY_AFTER_SECONDS: '1', OVERLOAD_SAMPLE_INTERVAL_MS: '100' });
    await sleep(300);
  }, 60_000);
  afterAll(() => stack.close());

  it('says not ready while the limit is reached, and for the Retry-After of its last refusal once it is not', async () => {
    const tenant = await stack.account();
    // A submission whose body never finishes holds the one place.
    const held = net.connect(api.port, '127.0.0.1');
    await new Promise((resolve) => held.once('connect', resolve));
    held.write(`POST /api/v2/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${tenant.key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"workflow":`);
    let atLimit: Reply | null = null;
    for (let i = 0; i < 50; i++) {
      atLimit = await call(`${api.url}/readyz`);
      if (atLimit.status === 503) break;
      await sleep(20);
    }
    expect(atLimit?.body.checks.load).toBe('error: 1 requests in flight, the limit');

    const refused = await call(`${api.url}/api/v2/jobs`, { headers: bearer(tenant.key) });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');

    // The held request gone, the limit is no longer reached, but a client was just told to come back in 1 s.
    held.destroy();
    let afterRefusal: Reply | null = null;
    for (let i = 0; i < 50; i++) {
      afterRefusal = await call(`${api.url}/readyz`);
      if (!/requests in flight/.test(afterRefusal.body.checks.load)) break;
      await sleep(10);
    }
    expect(afterRefusal?.status).toBe(503);
    expect(afterRefusal?.body.checks.load).toMatch(/^error: refused a request \d+ ms ago \(requests_in_flight\)$/);

    await sleep(1000);
    const ready = await call(`${api.url}/readyz`);
    expect([ready.status, ready.body.checks.load]).toEqual([200, 'ok']);
    expect((await call(`${api.url}/api/v2/jobs`, { headers: bearer(tenant.key) })).status).toBe(200);
  }, 30_000);
});
