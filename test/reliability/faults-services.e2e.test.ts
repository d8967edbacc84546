import { randomUUID } from 'node:crypto';
import { Blake3Hasher } from '@napi-rs/blake-hash';
import { loadConfig } from '#libs/config';
import { createBlobStore } from '#libs/storage';
import { slowJob, startCloud } from '../support/cloud.js';
import { TEST_S3_ENDPOINT } from '../support/env.js';
import { bearer, call, uploadForm } from '../support/http.js';
import { JobBook, describeStatuses } from '../support/invariants.js';
import { waitUntil } from '../support/jobs.js';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { FaultProxy, PrivatePostgres, PrivateRedis } from '../support/services.js';
import { TestStack, type StackServices } from '../support/stack.js';

/**
 * PostgreSQL, Redis and the S3 store failing under running jobs. This suite brings its own
 * PostgreSQL and Redis servers (the shared ones serve every other suite) and reaches s3rver
 * through a proxy it can switch off.
 */
const report = new ReliabilityReport('Faults: services', 2);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let pg: PrivatePostgres;
let redis: PrivateRedis;
let s3: FaultProxy;
let services: StackServices;

beforeAll(async () => {
  pg = await new PrivatePostgres().init();
  redis = await new PrivateRedis().init();
  const target = new URL(TEST_S3_ENDPOINT);
  s3 = await new FaultProxy(target.hostname, Number(target.port)).start();
  services = { pgAdminUrl: pg.adminUrl, redisUrl: redis.url, s3Endpoint: s3.url };
}, 60_000);
afterAll(async () => {
  report.save();
  await s3?.close();
  await redis?.kill();
  pg?.destroy();
});

async function cloud(stack: TestStack, workers: number, env: Record<string, string> = {}): Promise<RunningProcess> {
  await stack.open();
  return (await startCloud(stack, { workers, engine: { SIM_STEP_MS: '10' }, worker: env, api: env })).api;
}

describe('Redis restarted, losing everything it held, while jobs are queued and running', () => {
  let stack: TestStack;
  afterAll(() => stack?.close());

  it('still runs every queued job, runs none twice, and the API recovers', async () => {
    stack = new TestStack('local', services);
    const api = await cloud(stack, 2);
    const account = await stack.account({ tier: 'enterprise' });
    await stack.accounts.setLimits(account.id, { maxConcurrentJobs: 2 });
    const book = new JobBook(stack, account.key);
    await Promise.all(Array.from({ length: 14 }, (_, i) => book.submit([api.url], slowJob(500 + i * 10, i), randomUUID())));
    await waitUntil(async () => (await stack.db.job.count({ where: { status: 'running', enginePromptId: { not: null } } })) === 2, 20_000, 'two running');

    await redis.kill();
    // Submissions while Redis is down: answered (maybe with errors), retried by the client.
    const during = Array.from({ length: 4 }, (_, i) => book.submit([api.url], slowJob(700 + i * 10, 20 + i), randomUUID(), 90_000));
    await sleep(2000);
    await redis.start();
    await Promise.all(during);

    await book.waitAllTerminal(150_000);
    const result = await book.verify(api.url, redis.url);
    const reruns = await stack.db.job.count({ where: { attempts: { gt: 1 } } });
    const failures = (await stack.db.job.findMany({ where: { status: 'failed' }, select: { error: true } })).map((j) => JSON.stringify(j.error));
    report.record({
      tried: 'Redis SIGKILL and restart without persistence (2 running, 12 queued, 4 submitted during the outage)',
      count: 1,
      outcome: `${describeStatuses(result.byStatus)}; ${reruns} run twice; submissions retried ${book.retried} (${[...book.errorsSeen].map(([s, n]) => `${s}×${n}`).join(', ') || 'no errors'}); ${result.violations.length} violations${failures.length ? `; failed: ${failures.join(' ')}` : ''}`,
      held: result.violations.length === 0 && result.byStatus.succeeded === 18 && reruns === 0,
    });
    expect(result.violations).toEqual([]);
    expect(result.byStatus).toEqual({ succeeded: 18 });
    expect(reruns).toBe(0);
  }, 240_000);
});

describe('PostgreSQL restarted under load', () => {
  let stack: TestStack;
  afterAll(() => stack?.close());

  it('answers 503 in the envelope meanwhile, never a 500 or a stack trace, and recovers by itself', async () => {
    stack = new TestStack('local', services);
    const api = await cloud(stack, 1);
    const account = await stack.account({ tier: 'enterprise' });
    const book = new JobBook(stack, account.key);
    const seen = new Map<number, number>();
    const leaks: string[] = [];
    let stop = false;
    // A steady trickle of reads while submissions go through the careful client.
    const reader = (async () => {
      while (!stop) {
        const reply = await call(`${api.url}/api/v2/jobs?limit=5`, { headers: bearer(account.key), signal: AbortSignal.timeout(10_000) }).catch(() => null);
        if (reply) {
          seen.set(reply.status, (seen.get(reply.status) ?? 0) + 1);
          if (reply.status >= 500 && (reply.status === 500 || /\bat \w|\.ts:\d|prisma|ECONNREFUSED|stack/i.test(reply.text))) leaks.push(`${reply.status} ${reply.text.slice(0, 200)}`);
          if (reply.status >= 500) {
            const code = reply.body?.error?.code;
            if (typeof code !== 'string') leaks.push(`not an envelope: ${reply.text.slice(0, 200)}`);
          }
        }
        await sleep(50);
      }
    })();
    const submissions: Promise<string>[] = [];
    const submitter = (async () => {
      for (let i = 0; i < 40 && !stop; i++) {
        submissions.push(book.submit([api.url], slowJob(50 + i, i), randomUUID(), 90_000));
        await sleep(100);
      }
    })();
    await sleep(1000);
    pg.stop('fast');
    await sleep(3000);
    pg.start();
    const back = Date.now();
    await submitter;
    await Promise.all(submissions);
    // Recovered: a fresh read answers 200 without any restart of ours.
    await waitUntil(async () => (await call(`${api.url}/api/v2/jobs?limit=1`, { headers: bearer(account.key) })).status === 200, 30_000, 'API answering again');
    const recoveredMs = Date.now() - back;
    stop = true;
    await reader;

    await book.waitAllTerminal(120_000);
    const result = await book.verify(api.url, redis.url);
    const statuses = [...seen].map(([s, n]) => `${s}×${n}`).join(', ');
    report.record({
      tried: 'PostgreSQL stopped for 3 s under 10 submissions/s and 20 reads/s, then started',
      count: 1,
      outcome: `reads answered ${statuses}; submissions retried ${book.retried} (${[...book.errorsSeen].map(([s, n]) => `${s}×${n}`).join(', ')}); recovered ${recoveredMs} ms after restart; ${describeStatuses(result.byStatus)}; ${leaks.length} leaks, ${result.violations.length} violations`,
      held: leaks.length === 0 && !seen.has(500) && result.violations.length === 0 && result.byStatus.succeeded === 40,
    });
    expect(leaks).toEqual([]);
    expect(seen.has(500)).toBe(false);
    expect([...seen.keys()].some((s) => s === 503)).toBe(true);
    expect(result.violations).toEqual([]);
    expect(result.byStatus).toEqual({ succeeded: 40 });
  }, 240_000);
});

describe('the S3 store unavailable during output upload', () => {
  let stack: TestStack;
  afterAll(() => {
    s3.setMode('pass');
    return stack?.close();
  });

  it('retries; no job succeeds with a missing output and no half-written blob is ever served', async () => {
    stack = new TestStack('s3', services);
    // A silent store is given up on after 3 s (30 s in production) and the upload retried.
    const api = await cloud(stack, 2, { S3_REQUEST_TIMEOUT_MS: '3000' });
    const account = await stack.account({ tier: 'enterprise' });
    const book = new JobBook(stack, account.key);
    const bigOutput = (i: number) => ({ '1': { class_type: 'SimLargeFile', inputs: { size_bytes: 6 * 1024 * 1024 + i, filename_prefix: 'big', seed: i } } });
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => book.submit([api.url], bigOutput(i), randomUUID())));
    await waitUntil(async () => (await stack.db.job.count({ where: { id: { in: ids }, status: { in: ['running', 'succeeded'] } } })) >= 2, 20_000, 'jobs running');

    s3.setMode('refuse');
    // A client uploading meanwhile is told to retry, in the envelope, and nothing is recorded.
    const t0 = Date.now();
    const upload = await call(`${api.url}/api/v2/assets`, { method: 'POST', headers: bearer(account.key), body: uploadForm(Buffer.from('during the outage'), 'outage.txt') });
    const uploadMs = Date.now() - t0;
    await sleep(Math.max(0, 2500 - uploadMs));
    s3.setMode('blackhole');
    await sleep(1500);
    s3.setMode('pass');

    await book.waitAllTerminal(120_000);
    const result = await book.verify(api.url, redis.url);
    // Every blob the database knows is whole in the store: its bytes hash to its name.
    const store = createBlobStore(loadConfig(stack.env()));
    const blobs = await stack.db.blob.findMany();
    let broken = 0;
    for (const blob of blobs) {
      const hasher = new Blake3Hasher();
      let size = 0;
      try {
        for await (const chunk of await store.read(blob.hash)) {
          hasher.update(chunk as Buffer);
          size += (chunk as Buffer).length;
        }
      } catch {
        broken++;
        continue;
      }
      if (hasher.digest('hex') !== blob.hash || BigInt(size) !== blob.sizeBytes) broken++;
    }
    // A failed job says why; a succeeded one has its output (checked by verify).
    const failed = await stack.db.job.findMany({ where: { id: { in: ids }, status: 'failed' }, select: { error: true } });
    const unexplained = failed.filter((j) => typeof (j.error as { code?: unknown } | null)?.code !== 'string').length;
    const outageAssets = await stack.db.asset.count({ where: { accountId: account.id, filePath: 'outage.txt' } });
    report.record({
      tried: 'an upload through the API while S3 refuses connections',
      count: 1,
      outcome: `${upload.status} ${upload.body?.error?.code ?? upload.text.slice(0, 60)} after ${uploadMs} ms (Retry-After ${upload.headers.get('retry-after')}); ${outageAssets} asset recorded`,
      held: upload.status === 503 && upload.body?.error?.code === 'service_unavailable' && outageAssets === 0,
    });
    report.record({
      tried: 'S3 refusing connections for 2.5 s, then swallowing them for 1.5 s, during 10 uploads of 6 MiB outputs',
      count: s3.faults,
      outcome: `${describeStatuses(result.byStatus)}; ${result.outputsChecked} outputs verified; ${blobs.length} blobs whole, ${broken} broken; ${result.violations.length} violations`,
      held: result.violations.length === 0 && broken === 0 && unexplained === 0,
    });
    expect(result.violations).toEqual([]);
    expect(broken).toBe(0);
    expect(unexplained).toBe(0);
    expect(upload.status).toBe(503);
    expect(upload.body.error.code).toBe('service_unavailable');
    expect(upload.headers.get('retry-after')).toBe('1');
    expect(outageAssets).toBe(0);
    expect(result.byStatus.succeeded ?? 0).toBeGreaterThanOrEqual(8);
  }, 300_000);
});
