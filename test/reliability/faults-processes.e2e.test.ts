import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { JobEventLog, eventIdOf, jobKeys } from '#libs/jobs';
import { Redis } from 'ioredis';
import { slowJob, textToImage } from '../support/cloud.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { bearer, call } from '../support/http.js';
import { JobBook, describeStatuses } from '../support/invariants.js';
import { waitUntil } from '../support/jobs.js';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { SseClient } from '../support/sse.js';
import { TestStack } from '../support/stack.js';
import { V1Socket } from '../v1/v1-world.js';

/** Processes dying under running jobs: workers, engines, API replicas. The shared PostgreSQL and Redis stay up. */
const report = new ReliabilityReport('Faults: processes', 1);
afterAll(() => report.save());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a worker and an engine killed mid-job', () => {
  const stack = new TestStack('local');
  let account: { id: string; key: string };
  let api: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    account = await stack.account({ tier: 'enterprise' });
    api = await stack.startApi();
  });
  afterAll(() => stack.close());

  const startPair = async (id: string, enginePort = '0') => {
    const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: enginePort, SIM_STEP_MS: '10' });
    const worker = await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: id }, 'ready');
    return { engine, worker };
  };

  it('accounts for every job after SIGKILL of a worker and of an engine, both restarted', async () => {
    const a = await startPair('kill-a');
    const b = await startPair('kill-b');
    const book = new JobBook(stack, account.key);
    const ids = await Promise.all(Array.from({ length: 12 }, (_, i) => book.submit([api.url], slowJob(700 + i * 10, i), randomUUID())));
    const runningOn = async (worker: string) =>
      (await stack.db.job.count({ where: { id: { in: ids }, status: 'running', workerId: worker, enginePromptId: { not: null } } })) > 0;
    await waitUntil(async () => (await runningOn('kill-a')) && (await runningOn('kill-b')), 20_000, 'both workers busy');

    await a.worker.stop('SIGKILL');
    await b.engine.stop('SIGKILL');
    await sleep(1000);
    const a2 = await stack.start('apps/worker/src/main.js', { ENGINE_URL: a.engine.url, WORKER_PORT: '0', WORKER_ID: 'kill-a' }, 'ready');
    const b2 = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: String(b.engine.port), SIM_STEP_MS: '10' });

    await book.waitAllTerminal(120_000);
    const result = await book.verify(api.url, TEST_REDIS_URL);
    const reruns = await stack.db.job.count({ where: { id: { in: ids }, attempts: { gt: 1 } } });
    report.record({
      tried: 'worker SIGKILL and engine SIGKILL mid-job, both restarted (12 jobs, 2 workers)',
      count: 2,
      outcome: `${describeStatuses(result.byStatus)}; ${reruns} run again; ${result.outputsChecked} outputs verified; ${result.violations.length} violations`,
      held: result.violations.length === 0 && result.byStatus.succeeded === 12,
    });
    expect(result.violations).toEqual([]);
    expect(result.byStatus).toEqual({ succeeded: 12 });
    expect(reruns).toBeGreaterThanOrEqual(1);
    for (const p of [a2, b2, a.engine, b.worker]) await p.stop();
  }, 180_000);
});

describe('a worker paused while its job is taken over', () => {
  const stack = new TestStack('local');
  let account: { id: string; key: string };
  let api: RunningProcess;

  beforeAll(async () => {
    await stack.open();
    account = await stack.account({ tier: 'enterprise' });
    api = await stack.startApi();
  });
  afterAll(() => stack.close());

  it('records nothing once resumed: no output, event or progress, and the job is charged for the engine time of the run that ended it', async () => {
    const workers = new Map<string, RunningProcess>();
    for (const id of ['pause-a', 'pause-b']) {
      const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '10' });
      workers.set(id, await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: id }, 'ready'));
    }
    const submitted = await call(`${api.url}/api/v2/jobs`, { method: 'POST', headers: bearer(account.key, { 'content-type': 'application/json' }), body: JSON.stringify({ workflow: slowJob(3_000, 5) }) });
    expect(submitted.status).toBe(201);
    const jobId = submitted.body.id as string;
    let first = '';
    await waitUntil(async () => {
      const job = await stack.db.job.findUniqueOrThrow({ where: { id: jobId } });
      first = job.workerId ?? '';
      return job.status === 'running' && job.enginePromptId !== null && first !== '';
    }, 20_000, 'the job running');
    // The first worker stops answering; its engine runs the prompt to its end meanwhile.
    workers.get(first)!.child.kill('SIGSTOP');
    const taken = await (async () => {
      await waitUntil(async () => (await stack.db.job.findUniqueOrThrow({ where: { id: jobId } })).status === 'succeeded', 60_000, 'the job to succeed on the other worker');
      return stack.db.job.findUniqueOrThrow({ where: { id: jobId }, include: { outputs: true } });
    })();
    expect(taken.workerId).not.toBe(first);
    expect(taken.attempts).toBe(2);
    const redis = new Redis(TEST_REDIS_URL);
    const events = new JobEventLog(redis, jobKeys(stack.redisPrefix), 60_000);
    const logged = await events.since(jobId);

    workers.get(first)!.child.kill('SIGCONT');
    // Long enough for the resumed worker to read what its engine sent and to try to record it.
    await waitUntil(() => workers.get(first)!.output.some((l) => l.includes('not finished by this run')), 20_000, 'the resumed worker to give the job up');
    const after = await stack.db.job.findUniqueOrThrow({ where: { id: jobId }, include: { outputs: true } });
    expect(after.outputs.map((o) => o.id)).toEqual(taken.outputs.map((o) => o.id));
    expect(after.completedAt).toEqual(taken.completedAt);
    expect(after.progress).toEqual(taken.progress);
    expect(after.status).toBe('succeeded');
    expect(await stack.db.asset.count({ where: { jobId } })).toBe(taken.outputs.length);
    expect((await events.since(jobId)).map((e) => e.id)).toEqual(logged.map((e) => e.id));
    expect(await stack.db.creditLedgerEntry.count({ where: { ref: jobId } })).toBe(1);
    // Charged for the run that ended it (about 3 s of engine time), not for the time since the
    // first start, which the lost run and the takeover made several seconds longer.
    expect(after.executionMs!).toBeGreaterThan(6_000);
    expect(Number(after.chargedCredits)).toBeLessThanOrEqual(5);
    report.record({
      tried: 'worker SIGSTOP mid-job until another worker finished the job, then SIGCONT',
      count: 1,
      outcome: `taken over on attempt ${after.attempts}; after resuming the first worker recorded ${after.outputs.length - taken.outputs.length} outputs and ${(await events.since(jobId)).length - logged.length} events; charged ${after.chargedCredits} credits for ${after.executionMs} ms since the first start`,
      held: true,
    });
    redis.disconnect();
  }, 120_000);
});

describe('an API replica killed under open SSE and WebSocket connections', () => {
  const stack = new TestStack('local');
  let account: { id: string; key: string };
  let replicas: RunningProcess[];

  beforeAll(async () => {
    await stack.open();
    account = await stack.account({ tier: 'enterprise' });
    const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '60' });
    await stack.start('apps/worker/src/main.js', { ENGINE_URL: engine.url, WORKER_PORT: '0', WORKER_ID: 'replica-w' }, 'ready');
    replicas = [await stack.startApi(), await stack.startApi()];
  });
  afterAll(() => stack.close());

  const openSocket = async (apiUrl: string, clientId: string) => {
    const ws = new WebSocket(`${apiUrl.replace('http', 'ws')}/ws?clientId=${clientId}&token=${account.key}`);
    const socket = new V1Socket(ws);
    await socket.opened;
    await socket.waitFor((m) => m.type === 'status');
    return socket;
  };

  it('lets SSE clients resume on another replica with Last-Event-ID and miss nothing; WebSocket clients reconnect', async () => {
    const [doomed, survivor] = replicas as [RunningProcess, RunningProcess];
    const clientId = `ws-${randomUUID()}`;
    const sockets = await Promise.all(Array.from({ length: 5 }, () => openSocket(doomed.url, clientId)));
    const submitted = await call(`${doomed.url}/api/prompt`, {
      method: 'POST',
      headers: { 'x-api-key': account.key, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: textToImage(7, 60), client_id: clientId }),
    });
    expect(submitted.status).toBe(200);
    const jobId = submitted.body.prompt_id as string;

    const sse = Array.from({ length: 20 }, () => new SseClient(`${doomed.url}/api/v2/jobs/${jobId}/events`, bearer(account.key)));
    await Promise.all(sse.map((c) => c.until((events) => events.filter((e) => e.event === 'progress').length >= 3, 30_000)));
    await sockets[0]!.waitFor((m) => m.type === 'progress' && m.data?.prompt_id === jobId);

    await doomed.stop('SIGKILL');
    await Promise.all(sse.map((c) => c.ended));
    const resumed = sse.map((c) => new SseClient(`${survivor.url}/api/v2/jobs/${jobId}/events`, bearer(account.key, { 'last-event-id': c.lastId()! })));
    const reconnected = await Promise.all(sockets.map(() => openSocket(survivor.url, clientId)));
    await Promise.all(resumed.map((c) => c.ended));
    await Promise.all(reconnected.map((s) => s.ended(jobId, 30_000)));

    // What every SSE client should have seen: each logged event after the first one it was sent.
    const redis = new Redis(TEST_REDIS_URL);
    // Logged events go out under their wire ids (eventIdOf), which every stream gives them alike.
    const logged = new Map((await new JobEventLog(redis, jobKeys(stack.redisPrefix), 3_600_000).since(jobId)).map((e) => [eventIdOf(e.id), e.event]));
    redis.disconnect();
    const loggedIds = [...logged.keys()];
    let missing = 0;
    let duplicated = 0;
    for (let i = 0; i < sse.length; i++) {
      // Snapshot and queue-position frames reuse the last logged id; only logged events are counted.
      const seen = [...sse[i]!.events, ...resumed[i]!.events].filter((e) => e.id !== null && logged.get(e.id) === e.event).map((e) => e.id!);
      const firstLogged = sse[i]!.events.find((e) => e.event === 'progress')!.id!;
      const expected = loggedIds.slice(loggedIds.indexOf(firstLogged));
      const unique = new Set(seen);
      missing += expected.filter((id) => !unique.has(id)).length;
      duplicated += seen.length - unique.size;
    }
    const lastStatus = JSON.parse(resumed[0]!.events.filter((e) => e.event === 'status').at(-1)!.data).status;
    const history = await call(`${survivor.url}/api/history/${jobId}`, { headers: { 'x-api-key': account.key } });
    const historyOutputs = Object.keys(history.body[jobId]?.outputs ?? {}).length;
    report.record({
      tried: 'API replica SIGKILL with 20 SSE clients on one job; resume on the other replica with Last-Event-ID',
      count: 20,
      outcome: `${missing} events missed, ${duplicated} duplicated; final status ${lastStatus}`,
      held: missing === 0 && duplicated === 0 && lastStatus === 'succeeded',
    });
    report.record({
      tried: 'API replica SIGKILL with 5 v1 WebSocket clients; reconnect to the other replica with the same clientId',
      count: 5,
      outcome: `${reconnected.length} reconnected and saw the prompt end; /history lists ${historyOutputs} output node(s)`,
      held: reconnected.length === 5 && historyOutputs === 1,
    });
    expect(missing).toBe(0);
    expect(duplicated).toBe(0);
    expect(lastStatus).toBe('succeeded');
    expect(historyOutputs).toBe(1);
    for (const s of [...sockets, ...reconnected]) s.close();
  }, 120_000);
});
