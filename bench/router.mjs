// Router benchmark: the latency the router adds over calling a partner directly.
//
//   npx tsc -p tsconfig.build.json && node bench/router.mjs
//
// Starts the partner simulator (apps/partner-sim) twice: as a process of its own, as `npm start`
// runs it, for the call rounds, and in this process for the two rows that read its clock (below).
// Then a fresh database and the built API (dist/apps/api/src/main.js) with every partner pointed
// at a simulator. A synchronous
// model, openai/gpt-image-1, answers after BENCH_PROVIDER_DELAY_MS (default 50 ms, like a fast
// model). At 1 and at 64 concurrent callers the bench sends the same call to the simulator
// directly and through the router (POST /v1/models/openai/gpt-image-1), in BENCH_ROUNDS alternating rounds
// (default 3), and prints p50/p99 of both and the difference: each round's, and the median over
// the rounds. The 64-caller rounds run a second time with the partner's answer time spread over
// BENCH_PROVIDER_SPREAD_MS more (default 10 ms), so that the callers do not move in step. Before the rounds, BENCH_WARMUP_CALLS calls (default 5,000, at 64 callers) run the
// router's call path hot, as it is in a replica that has been serving. Needs PostgreSQL and Redis (DATABASE_ADMIN_URL, REDIS_URL; local defaults).
//
// It also prints the API's CPU time per routed call (user + system, from /proc). On a shared VM the
// latency of a round swings with the neighbours; this figure moves much less, so it is the one to
// compare when judging a change to the call path. At 1 caller the API sleeps between calls and
// each call runs on cold caches, which makes its CPU time several times that of a busy API.
//
// Two more rows. Submit-then-poll (bfl/flux-pro-1.1): the time from the simulator sending the
// poll answer that says Ready to the caller holding the router's answer (which includes
// re-hosting the image), BENCH_POLL_CALLS calls (default 300) at 1 and at 16 callers. Re-hosting
// a 5 MB result (recraft/recraftv3): the time until the caller holds the result's bytes, directly
// (the call, then the provider's URL) against through the router (the call, which re-hosts, then
// the signed URL), BENCH_REHOST_CALLS of each (default 40), alternating, after BENCH_REHOST_WARMUP
// unmeasured pairs (default 100: like the call rounds, the path runs hot, as in a replica that has
// been serving). BENCH_SKIP=calls,poll,rehost
// leaves out phases by name (calls: the 1- and 64-caller rounds and their warm-up).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { closeRequests, cpuMs, deleteRedisPrefix, download, measureCalls, median, percentile, postgresCpuMs, request, start, stop, timedPost } from './support.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { applyMigrations, createPrismaClient, dropDatabase, ensureDatabase } = await import(path.join(ROOT, 'dist/libs/db/index.js'));
const { mintRouterToken } = await import(path.join(ROOT, 'dist/libs/auth/index.js'));
const { SERVICE_NODE_FLAGS, tuneRuntime } = await import(path.join(ROOT, 'dist/libs/runtime/index.js'));
// The simulator serves from this process, which under `npm start` is a process of its own started
// with the services' V8 flags. Without them this process freed the media it served with a full
// collection per 5 MB re-host, pausing the partner mid-transfer for up to 20 ms.
tuneRuntime();
const { startPartnerSim } = await import(path.join(ROOT, 'dist/apps/partner-sim/src/server.js'));

const DELAY_MS = Number(process.env.BENCH_PROVIDER_DELAY_MS ?? 50);
const REQUESTS_SERIAL = Number(process.env.BENCH_REQUESTS_SERIAL ?? 300);
const REQUESTS_PARALLEL = Number(process.env.BENCH_REQUESTS_PARALLEL ?? 6400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
// The spread of the partner's answer time in the last set of rounds (see below).
const SPREAD_MS = Number(process.env.BENCH_PROVIDER_SPREAD_MS ?? 10);
const ADMIN_URL = process.env.DATABASE_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SECRET = 'bench-router-secret-0123456789';
const name = `router_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
const dbUrl = (() => {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
})();

const POLL_CALLS = Number(process.env.BENCH_POLL_CALLS ?? 300);
const REHOST_CALLS = Number(process.env.BENCH_REHOST_CALLS ?? 40);
const REHOST_WARMUP = Number(process.env.BENCH_REHOST_WARMUP ?? 100);
const REHOST_BYTES = 5 * 1024 * 1024;
const SKIP = new Set((process.env.BENCH_SKIP ?? '').split(',').filter(Boolean));

// When each generation's final poll answer left the simulator (performance.now(), this process).
const finalServedAt = new Map();
const sim = await startPartnerSim({ onFinalServed: (_provider, taskId, at) => finalServedAt.set(taskId, at) });

// The call rounds' partner is the simulator as `npm start` runs it, a process of its own: a real
// partner is another machine. Served from this process, it shared one event loop with the 64
// callers, and each routed call cost that loop two more turns than a direct one (the partner's side
// of the API's request), which the bench then counted as the router's.
const callSim = await start('apps/partner-sim/src/main.js', { PATH: process.env.PATH, PARTNER_SIM_HOST: '127.0.0.1', PARTNER_SIM_PORT: '0' });
// The shipped catalog with the bench's poll interval, as the tests write theirs.
const catalogFile = `/tmp/${name}-catalog.json`;
{
  const dir = path.join(ROOT, 'apps/api/src/router/catalog/data');
  const { models } = JSON.parse(readFileSync(path.join(dir, 'catalog.json'), 'utf8'));
  writeFileSync(catalogFile, JSON.stringify({ models: models.map((m) => ({ ...m, input_schema: path.join(dir, m.input_schema), ...(m.poll_interval_ms ? { poll_interval_ms: 20 } : {}) })) }));
}

await ensureDatabase(dbUrl);
await applyMigrations(dbUrl);
const db = createPrismaClient(dbUrl, 2);
const account = await db.account.create({
  data: {
    name: 'bench',
    creditBalance: 10n ** 12n,
    routerEnabled: true,
    routerMaxConcurrent: 10_000,
    routerSpendCapCents: 1_000_000_000,
    routerWindowCalls: 1_000_000_000,
    routerWindowSeconds: 60,
  },
});
const token = await mintRouterToken(SECRET, account.id);

// BENCH_API_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", profiles the API under load.
const apiArgs = (process.env.BENCH_API_NODE_ARGS ?? '').split(' ').filter(Boolean);
const api = spawn(process.execPath, [...SERVICE_NODE_FLAGS, ...apiArgs, path.join(ROOT, 'dist/apps/api/src/main.js')], {
  cwd: ROOT,
  env: {
    PATH: process.env.PATH,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    SIGNING_SECRET: 'bench-signing-secret-0123456789',
    DATABASE_URL: dbUrl,
    REDIS_URL,
    REDIS_PREFIX: name,
    API_HOST: '127.0.0.1',
    API_PORT: '0',
    STORAGE_DIR: `/tmp/${name}`,
    ROUTER_JWT_SECRET: SECRET,
    ROUTER_CATALOG_FILE: catalogFile,
    ...sim.routerEnv(),
    // The synchronous model of the call rounds at the simulator's own process (same keys).
    ROUTER_UPSTREAM_BASE_URLS: `${sim.routerEnv().ROUTER_UPSTREAM_BASE_URLS},openai=${callSim.url}/openai`,
  },
  stdio: ['ignore', 'pipe', 'pipe'],
});
const apiPort = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('the API did not start')), 30_000);
  const onLine = (line) => {
    if (!line.startsWith('{')) return process.stderr.write(`api: ${line}\n`);
    try {
      const msg = JSON.parse(line);
      if (msg.msg === 'listening') {
        clearTimeout(timer);
        resolve(msg.port);
      }
    } catch {
      // not JSON
    }
  };
  createInterface({ input: api.stdout }).on('line', onLine);
  createInterface({ input: api.stderr }).on('line', onLine);
  api.once('exit', (code) => reject(new Error(`the API exited with ${code}`)));
});

const apiUrl = `http://127.0.0.1:${apiPort}`;
const routerAuth = { authorization: `Bearer ${token}` };
// The partner's answer time is steered per call: [[slow:N]], plus up to [[spread:N]] more.
const bodyFor = (spread) => JSON.stringify({ model: 'gpt-image-1', prompt: `a lighthouse at dusk [[slow:${DELAY_MS}]]${spread > 0 ? ` [[spread:${spread}]]` : ''}`, size: '1024x1024' });
let BODY = bodyFor(0);
const direct = () => timedPost(`${callSim.url}/openai/v1/images/generations`, BODY, { authorization: `Bearer ${sim.keys.openai}` });
const routed = () => timedPost(`${apiUrl}/v1/models/openai/gpt-image-1`, BODY, routerAuth);
const pct = (sorted, p) => percentile(sorted, p / 100);
const ms = (v) => v.toFixed(2).padStart(8);

if (!SKIP.has('calls')) {
  console.log(`\nRouter added latency (times in ms)\n`);
  console.log('partner     callers  round  requests  direct p50  direct p99  router p50  router p99  added p50  added p99  API CPU/call  PG CPU/call');
  // A router in service has run its call path hot for a long time; a fresh process has not. Without
  // this, the 1-caller rounds measure V8 compiling the call path (hundreds of optimizing compiles
  // still run during the first thousand calls), not the router.
  const WARMUP_CALLS = Number(process.env.BENCH_WARMUP_CALLS ?? 5000);
  await measureCalls(routed, 64, WARMUP_CALLS, 0);
  await measureCalls(direct, 64, WARMUP_CALLS, 0);

  // With a partner that answers every call after exactly the same time, 64 callers in a closed loop
  // fall into step: each arrives with the other 63 in the same millisecond, every 50 ms, and waits
  // for their CPU time in the router before its own. Callers of a real service arrive independently
  // and a model takes a varying time, so the 64-caller rounds run twice: in step, and with the
  // partner's answer time spread over SPREAD_MS, which keeps callers from falling into step.
  const partnerLabel = (spread) => (spread > 0 ? `${DELAY_MS}-${DELAY_MS + spread} ms` : `${DELAY_MS} ms`);
  const summary = [];
  for (const [concurrency, total, spread] of [
    [1, REQUESTS_SERIAL, 0],
    [64, REQUESTS_PARALLEL, 0],
    [64, REQUESTS_PARALLEL, SPREAD_MS],
  ]) {
    BODY = bodyFor(spread);
    const added = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const warmup = concurrency * 10;
      const d = await measureCalls(direct, concurrency, total, warmup);
      const cpuBefore = cpuMs(api.pid);
      const pgBefore = postgresCpuMs();
      const r = await measureCalls(routed, concurrency, total, warmup);
      // The API's own CPU time per routed call (warm-up included): steadier than latency on a shared VM.
      // PostgreSQL's (every server process on the machine) covers the usage records written meanwhile.
      const cpuPerCall = (cpuMs(api.pid) - cpuBefore) / (total + warmup);
      const pgPerCall = (postgresCpuMs() - pgBefore) / (total + warmup);
      const row = { p50: pct(r, 50) - pct(d, 50), p99: pct(r, 99) - pct(d, 99), cpu: cpuPerCall, pg: pgPerCall };
      added.push(row);
      console.log(
        `${partnerLabel(spread).padEnd(10)}  ${String(concurrency).padStart(7)}  ${String(round).padStart(5)}  ${String(total).padStart(8)}  ${ms(pct(d, 50))}    ${ms(pct(d, 99))}    ${ms(pct(r, 50))}    ${ms(pct(r, 99))}   ${ms(row.p50)}   ${ms(row.p99)}   ${ms(row.cpu)}     ${ms(row.pg)}`,
      );
    }
    summary.push({ spread, concurrency, p50: median(added.map((a) => a.p50)), p99: median(added.map((a) => a.p99)), cpu: median(added.map((a) => a.cpu)), pg: median(added.map((a) => a.pg)) });
  }
  console.log(`\nmedian over ${ROUNDS} rounds\npartner     callers  added p50  added p99  API CPU/call  PG CPU/call`);
  for (const { spread, concurrency, p50, p99, cpu, pg } of summary) console.log(`${partnerLabel(spread).padEnd(10)}  ${String(concurrency).padStart(7)}  ${ms(p50)}   ${ms(p99)}   ${ms(cpu)}     ${ms(pg)}`);
  console.log('\ntargets: added p50 < 2 ms, added p99 < 10 ms');
}

if (!SKIP.has('poll')) {
  // Submit-then-poll: from the provider's Ready leaving the simulator to the caller's answer.
  console.log(`\nSubmit-then-poll, bfl/flux-pro-1.1 (a ${DELAY_MS} ms generation, its image re-hosted): provider Ready to the caller's answer, ms`);
  console.log('callers  calls      p50      p90      p99');
  const pollBody = JSON.stringify({ prompt: `a red fox in the snow [[slow:${DELAY_MS}]]`, width: 1024, height: 768 });
  const readyToAnswer = async () => {
    const res = await request(`${apiUrl}/v1/models/bfl/flux-pro-1.1`, { method: 'POST', headers: { ...routerAuth, 'content-type': 'application/json' }, body: pollBody });
    const answered = performance.now();
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`);
    const id = JSON.parse(res.text).id;
    const ready = finalServedAt.get(id);
    finalServedAt.delete(id);
    return answered - ready;
  };
  await measureCalls(readyToAnswer, 16, 200, 0);
  const pollSummary = [];
  for (const callers of [1, 16]) {
    const samples = await measureCalls(readyToAnswer, callers, POLL_CALLS, callers * 5);
    pollSummary.push({ callers, p50: pct(samples, 50) });
    console.log(`${String(callers).padStart(7)}  ${String(POLL_CALLS).padStart(5)}  ${ms(pct(samples, 50))} ${ms(pct(samples, 90))} ${ms(pct(samples, 99))}`);
  }
  console.log('target: p50 < 5 ms');
}

if (!SKIP.has('rehost')) {
  // Re-hosting a 5 MB result: the caller holding the bytes, directly and through the router.
  console.log(`\nRe-hosting a ${REHOST_BYTES / 1024 / 1024} MB result, recraft/recraftv3 (a ${DELAY_MS} ms generation): until the caller holds the bytes, ms`);
  const rehostBody = JSON.stringify({ prompt: `a map of the harbour [[slow:${DELAY_MS}]] [[size:${REHOST_BYTES}]]` });
  const fetchAll = async (url, headers) => {
    const got = await download(url, headers);
    if (got.status !== 200 || got.bytes !== REHOST_BYTES) throw new Error(`download of ${url}: HTTP ${got.status}, ${got.bytes} bytes`);
  };
  const rehostDirect = async () => {
    const started = performance.now();
    const res = await request(`${sim.url}/recraft/v1/images/generations`, { method: 'POST', headers: { authorization: `Bearer ${sim.keys.recraft}`, 'content-type': 'application/json' }, body: rehostBody });
    const answered = performance.now();
    await fetchAll(JSON.parse(res.text).data[0].url);
    return { total: performance.now() - started, call: answered - started };
  };
  const rehostRouted = async () => {
    const started = performance.now();
    const res = await request(`${apiUrl}/v1/models/recraft/recraftv3`, { method: 'POST', headers: { ...routerAuth, 'content-type': 'application/json' }, body: rehostBody });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`);
    const answered = performance.now();
    await fetchAll(JSON.parse(res.text).data[0].url);
    return { total: performance.now() - started, call: answered - started };
  };
  for (let i = 0; i < REHOST_WARMUP; i++) {
    await rehostDirect();
    await rehostRouted();
  }
  const directTimes = [];
  const routedTimes = [];
  for (let i = 0; i < REHOST_CALLS; i++) {
    directTimes.push(await rehostDirect());
    routedTimes.push(await rehostRouted());
  }
  const directMedian = median(directTimes.map((t) => t.total));
  const routedMedian = median(routedTimes.map((t) => t.total));
  // Where the time goes: the call (for the router, with the re-hosting) and the download after it.
  const split = (times) => `call ${median(times.map((t) => t.call)).toFixed(1)}, download ${median(times.map((t) => t.total - t.call)).toFixed(1)}`;
  console.log(`direct median ${directMedian.toFixed(1)} ms (${split(directTimes)}), through the router ${routedMedian.toFixed(1)} ms (${split(routedTimes)}): added ${(routedMedian - directMedian).toFixed(1)} ms, ${((100 * (routedMedian - directMedian)) / directMedian).toFixed(1)}%`);
  console.log('target: added < 25%');
}

closeRequests();
api.kill('SIGTERM');
await new Promise((resolve) => api.once('exit', resolve));
await sim.stop();
await stop(callSim);
rmSync(catalogFile, { force: true });
// The re-hosted media (5 MB each) and every other blob of the run.
rmSync(`/tmp/${name}`, { recursive: true, force: true });
await db.$disconnect();
await dropDatabase(dbUrl);
await deleteRedisPrefix(REDIS_URL, name);
process.exit(0);
