// Where one job's milliseconds go (docs/performance.md, "One job's milliseconds"):
//
//   node bench/one-job.mjs        (after `npx tsc -p tsconfig.build.json`)
//
// Runs BENCH_ROUNDS small-image jobs one at a time (EmptyImage 64×64 → SaveImage, a new colour
// each) through the whole stack with `Prefer: wait`, then places each on one clock from what the
// job leaves behind: the client's send and receipt, the row's created_at (insert), started_at
// (claim) and completed_at (the worker's ending), the Redis ids (ms) of its `running`, `output`
// and terminal status events, and the worker's "output stored" line (the output's own time). All
// processes share the machine's clock. Prints the median of each step.
import { createInterface } from 'node:readline';
import pg from 'pg';
import { Redis } from 'ioredis';
import { admin, benchEnv, closeRequests, download, dropDatabase, machine, median, migrate, request, start, stop } from './support.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 100);
const WARMUP = 30;

const { env } = benchEnv({ JOB_QUEUE_TIMEOUT_SECONDS: '3600' });
migrate(env);
const dir = `/tmp/${env.REDIS_PREFIX}/engine`;
const engine = await start('apps/sim-engine/src/main.js', { ...env, SIM_ENGINE_PORT: '0', SIM_STEP_MS: '1', SIM_LOG_STDERR: '0', SIM_OUTPUT_DIR: `${dir}/output`, SIM_INPUT_DIR: `${dir}/input`, SIM_TEMP_DIR: `${dir}/temp` });
// As in the pod of k8s/worker.yaml: the worker reads outputs from the engine's folder (BENCH_VIA_VIEW=1: through GET /view).
const worker = await start('apps/worker/src/main.js', { ...env, ENGINE_URL: engine.url, WORKER_PORT: '0', ENGINE_OUTPUT_DIR: process.env.BENCH_VIA_VIEW === '1' ? '' : `${dir}/output` }, 'ready');
const api = await start('apps/api/src/main.js', env);
const { api_key: key } = admin(env, 'account', 'create', '--name', 'bench', '--tier', 'enterprise', '--credits', '100000000');
const storedMs = new Map();
createInterface({ input: worker.child.stdout }).on('line', (line) => {
  if (!line.includes('"output stored"')) return;
  const m = JSON.parse(line);
  storedMs.set(m.job_id, m.store_ms);
});
const db = new pg.Client({ connectionString: env.DATABASE_URL });
await db.connect();
const redis = new Redis(env.REDIS_URL);

const steps = {};
const add = (name, ms) => (steps[name] ??= []).push(ms);
let color = Math.floor(Math.random() * 0xffff00);
try {
  for (let i = 0; i < WARMUP + ROUNDS; i++) {
    color = (color + 1) % 0xffffff;
    const workflow = {
      '1': { class_type: 'EmptyImage', inputs: { width: 64, height: 64, batch_size: 1, color } },
      '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'one' } },
    };
    const t0 = performance.now();
    // Epoch ms as the database and Redis count them.
    const sent = performance.timeOrigin + t0;
    const res = await request(`${api.url}/api/v2/jobs`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', prefer: 'wait=30' }, body: JSON.stringify({ workflow }) });
    const t1 = performance.now();
    const job = JSON.parse(res.text);
    if (job.status !== 'succeeded') throw new Error(`job ended ${job.status}`);
    const got = await download(job.outputs[0].url);
    if (got.status !== 200) throw new Error(`output answered ${got.status}`);
    const t2 = performance.now();
    if (i < WARMUP) continue;
    const { rows } = await db.query('SELECT extract(epoch FROM created_at) * 1000 AS created, extract(epoch FROM started_at) * 1000 AS started, extract(epoch FROM completed_at) * 1000 AS completed FROM jobs WHERE id = $1', [job.id]);
    const row = { created: Number(rows[0].created), started: Number(rows[0].started), completed: Number(rows[0].completed) };
    const events = await redis.xrange(`${env.REDIS_PREFIX}:job:${job.id}:events`, '-', '+');
    const at = (event, status) => {
      const e = events.find(([, f]) => f[1] === event && (!status || JSON.parse(f[3]).status === status));
      return e ? Number(e[0].split('-')[0]) : NaN;
    };
    const running = at('status', 'running');
    const output = at('output');
    const done = at('status', 'succeeded');
    const received = sent + (t1 - t0);
    add('API in, validation, insert committed (send → created_at)', row.created - sent);
    add('dispatch, queue hop, claim (created_at → started_at)', row.started - row.created);
    add('claim → running event', running - row.started);
    add('running event → output event (staging, prompt, engine, output fetch/hash/store/record)', output - running);
    add('  of which the output path itself (worker "output stored")', storedMs.get(job.id) ?? NaN);
    add('output event → completed_at (engine end, log tail, cleanup)', row.completed - output);
    add('completed_at → terminal status event (finishJob statement, event)', done - row.completed);
    add('terminal event → response received (wake-up, read back, render)', received - done);
    add('GET of the output URL', t2 - t1);
    add('total: send → output downloaded', t2 - t0);
  }
} finally {
  await db.end();
  redis.disconnect();
  closeRequests();
  await stop(api, worker, engine);
  await dropDatabase(env);
}
console.log(`machine: ${machine()}; ${ROUNDS} jobs after ${WARMUP} unmeasured; medians in ms (event ids and timestamps have 1 ms or finer resolution)`);
for (const [name, xs] of Object.entries(steps)) console.log(`${median(xs).toFixed(1).padStart(7)}  ${name}`);
