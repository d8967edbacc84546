// GET /api/object_info on the wire, with and without compression: the real engine's definitions
// (test/fixtures/engine-transcripts/object_info_full.json, 383 classes, as ComfyUI 0.3.64
// reported them) reported by the sim-engine (SIM_OBJECT_INFO_FILE), published by a worker and
// served by the API. For no Accept-Encoding, gzip and br: the bytes sent, the time from the
// request to the last byte (median and p90 over BENCH_ROUNDS sequential requests on a kept-alive
// connection, after BENCH_WARMUP unmeasured ones), the API's CPU time per answer, and what the
// bytes alone would take on slower links.
import http from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { ROOT, admin, benchEnv, cpuMs, dropDatabase, machine, migrate, percentile, start, stop } from './support.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 30);
const RECORDED = `${ROOT}test/fixtures/engine-transcripts/object_info_full.json`;
const LINKS_MBIT = [100, 10];

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** One GET; resolves with the status, the encoding, the bytes as sent and the ms to the last byte. */
function get(url, headers) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.get(url, { agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, encoding: res.headers['content-encoding'] ?? 'identity', bytes: Buffer.concat(chunks), ms: performance.now() - started }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

function decode({ encoding, bytes }) {
  if (encoding === 'gzip') return gunzipSync(bytes);
  if (encoding === 'br') return brotliDecompressSync(bytes);
  return bytes;
}

const { env } = benchEnv();
migrate(env);
const engine = await start('apps/sim-engine/src/main.js', { ...env, SIM_ENGINE_PORT: '0', SIM_LOG_STDERR: '0', SIM_OBJECT_INFO_FILE: RECORDED });
const worker = await start('apps/worker/src/main.js', { ...env, ENGINE_URL: engine.url, WORKER_PORT: '0' }, 'ready');
const api = await start('apps/api/src/main.js', env);
try {
  const { api_key: key } = admin(env, 'account', 'create', '--name', 'bench', '--tier', 'enterprise');
  const url = `${api.url}/api/object_info`;
  const auth = { 'x-api-key': key };
  let reference = null;
  for (let waited = 0; !reference; waited += 100) {
    const first = await get(url, auth);
    if (first.status === 200) reference = first.bytes;
    else if (waited > 20_000) throw new Error(`object_info answered ${first.status}`);
    else await new Promise((r) => setTimeout(r, 100));
  }
  const classes = Object.keys(JSON.parse(reference.toString('utf8'))).length;
  console.log(`machine: ${machine()}`);
  console.log(`object_info: ${classes} classes, ${reference.length} bytes of JSON; ${ROUNDS} requests each after ${WARMUP} unmeasured`);

  const rows = [];
  for (const [label, headers] of [
    ['identity', auth],
    ['gzip', { ...auth, 'accept-encoding': 'gzip' }],
    ['br', { ...auth, 'accept-encoding': 'br' }],
  ]) {
    for (let i = 0; i < WARMUP; i++) await get(url, headers);
    const times = [];
    let sent = 0;
    const cpuBefore = cpuMs(api.pid);
    for (let i = 0; i < ROUNDS; i++) {
      const res = await get(url, headers);
      if (res.status !== 200 || res.encoding !== label) throw new Error(`${label}: answered ${res.status} in ${res.encoding}`);
      if (!decode(res).equals(reference)) throw new Error(`${label}: the decoded answer differs from the plain one`);
      times.push(res.ms);
      sent = res.bytes.length;
    }
    const cpu = (cpuMs(api.pid) - cpuBefore) / ROUNDS;
    times.sort((a, b) => a - b);
    rows.push({ label, sent, p50: percentile(times, 0.5), p90: percentile(times, 0.9), cpu });
  }

  const links = LINKS_MBIT.map((mbit) => `at ${mbit} Mbit/s`);
  console.log(['encoding', 'bytes', 'ratio', 'median ms', 'p90 ms', 'API CPU ms', ...links].join('\t'));
  for (const r of rows) {
    const onLinks = LINKS_MBIT.map((mbit) => `+${((r.sent * 8) / (mbit * 1000)).toFixed(1)} ms`);
    console.log([r.label, r.sent, `${((100 * r.sent) / reference.length).toFixed(1)}%`, r.p50.toFixed(2), r.p90.toFixed(2), r.cpu.toFixed(2), ...onLinks].join('\t'));
  }
  console.log('(the last columns: the time those bytes alone take on such a link, beyond the loopback figures)');
} finally {
  agent.destroy();
  await stop(api, worker, engine);
  await dropDatabase(env);
}
