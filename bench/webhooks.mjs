// Webhooks benchmark, in one run on this machine:
//  1. the time from a job's end (its completed_at) to the first delivery attempt reaching a
//     receiver on loopback, job after job (target p50 < 50 ms);
//  2. POST /api/v2/jobs throughput at 64 clients with webhooks off (the account has no endpoint)
//     and on (an endpoint for every event type, delivered while the worker drains the jobs),
//     runs alternating so that the machine's drift falls on both alike (target: within 5%).
import http from 'node:http';
import { admin, benchClient, benchEnv, closeRequests, dropDatabase, machine, median, migrate, percentile, request, start, stop } from './support.mjs';

const LATENCY_JOBS = Number(process.env.BENCH_WEBHOOK_JOBS ?? 200);
const SUBMISSIONS = Number(process.env.BENCH_SUBMISSIONS ?? 2000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const CONCURRENCY = 64;

const tiny = (color) => ({
  '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color } },
  '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'bench' } },
});

// The receiver: answers 204 and notes when each event arrived (wall clock, as completed_at is).
const arrivals = new Map();
let received = 0;
const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const at = Date.now();
    received++;
    const event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (event.type === 'job.succeeded' && !arrivals.has(event.data.id)) arrivals.set(event.data.id, at);
    res.writeHead(204).end();
  });
});
await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const hookUrl = `http://127.0.0.1:${receiver.address().port}/hook`;

const { env } = benchEnv({ JOB_QUEUE_TIMEOUT_SECONDS: '3600', OUTBOUND_ALLOW_LOOPBACK: 'true' });
migrate(env);
const engine = await start('apps/sim-engine/src/main.js', { ...env, SIM_ENGINE_PORT: '0', SIM_STEP_MS: '1', SIM_LOG_STDERR: '0' });
const worker = await start('apps/worker/src/main.js', { ...env, ENGINE_URL: engine.url, WORKER_PORT: '0' }, 'ready');
const api = await start('apps/api/src/main.js', env);
const webhooks = await start('apps/webhooks/src/main.js', { ...env, WEBHOOK_PORT: '0', PUBLIC_URL: api.url }, 'ready');

function account(name) {
  const { api_key: key } = admin(env, 'account', 'create', '--name', name, '--tier', 'enterprise', '--credits', '100000000');
  return { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
}

/** The account's typed client (clients/typescript) on the bench's sockets. */
const clientOf = (auth) => benchClient(api.url, { apiKey: auth.authorization.slice('Bearer '.length) });

async function endpoint(auth, events) {
  const { response, error } = await (await clientOf(auth)).api.POST('/api/v2/webhooks/endpoints', { body: { url: hookUrl, events } });
  if (response.status !== 201) throw new Error(`endpoint answered ${response.status}: ${JSON.stringify(error)}`);
}

// 1. Job end to first attempt, one job at a time on a quiet system.
const latencyAuth = account('bench-latency');
await endpoint(latencyAuth, ['job.succeeded']);
const latencyClient = await clientOf(latencyAuth);
const latencies = [];
for (let i = 0; i < LATENCY_JOBS; i++) {
  const job = await latencyClient.submit({ workflow: tiny(i % 256) }, { waitSeconds: 30 });
  if (job.status !== 'succeeded') throw new Error(`job ended ${job.status}`);
  const until = Date.now() + 10_000;
  while (!arrivals.has(job.id)) {
    if (Date.now() > until) throw new Error(`no webhook for job ${job.id}`);
    await new Promise((r) => setTimeout(r, 2));
  }
  latencies.push(arrivals.get(job.id) - Date.parse(job.completed_at));
}
latencies.sort((a, b) => a - b);

// 2. Submission throughput, off and on alternating.
async function submissions(auth) {
  let next = 0;
  let measuredFrom = 0;
  const lat = [];
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < WARMUP + SUBMISSIONS) {
        const i = next++;
        const s = performance.now();
        if (i === WARMUP) measuredFrom = s;
        const res = await request(`${api.url}/api/v2/jobs`, { method: 'POST', headers: auth, body: JSON.stringify({ workflow: tiny(i % 256) }) });
        if (res.status !== 201) throw new Error(`submission answered ${res.status}: ${res.text}`);
        if (i >= WARMUP) lat.push(performance.now() - s);
      }
    }),
  );
  lat.sort((a, b) => a - b);
  return { perSecond: SUBMISSIONS / ((performance.now() - measuredFrom) / 1000), p99: percentile(lat, 0.99) };
}

const runs = { off: [], on: [] };
const receivedBefore = received;
for (let round = 0; round < ROUNDS; round++) {
  for (const mode of round % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
    const auth = account(`bench-${mode}-${round}`);
    if (mode === 'on') await endpoint(auth, ['job.succeeded', 'job.failed', 'job.canceled', 'job.expired', 'job.running', 'job.output']);
    runs[mode].push(await submissions(auth));
  }
}
const deliveredDuring = received - receivedBefore;

closeRequests();
await stop(webhooks, api, worker, engine);
receiver.close();
await dropDatabase(env);

const f = (x) => x.toFixed(1);
const rates = (mode) => runs[mode].map((r) => Math.round(r.perSecond));
const change = (median(rates('on')) / median(rates('off')) - 1) * 100;
console.log(`machine: ${machine()}`);
console.log(`job end to first webhook attempt, ${LATENCY_JOBS} jobs one at a time: p50 ${f(percentile(latencies, 0.5))} ms, p90 ${f(percentile(latencies, 0.9))} ms, p99 ${f(percentile(latencies, 0.99))} ms, max ${f(latencies.at(-1))} ms (target p50 < 50 ms)`);
console.log(`POST /api/v2/jobs at ${CONCURRENCY} clients, ${SUBMISSIONS} after ${WARMUP} unmeasured, ${ROUNDS} runs each, alternating:`);
console.log(`  webhooks off: ${rates('off').join(', ')} /s (median ${median(rates('off'))}); p99 ${runs.off.map((r) => f(r.p99)).join(', ')} ms`);
console.log(`  webhooks on:  ${rates('on').join(', ')} /s (median ${median(rates('on'))}); p99 ${runs.on.map((r) => f(r.p99)).join(', ')} ms; ${deliveredDuring} webhooks delivered meanwhile`);
console.log(`  on vs off: ${change >= 0 ? '+' : ''}${f(change)}% (target within 5%)`);
