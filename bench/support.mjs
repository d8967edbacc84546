// Shared pieces of the benchmarks: a private database and Redis prefix, processes started from
// the build, the resident memory of a process read from /proc, and a fake partner with a caller
// loop for the latency benchmarks.
import { spawn, execFileSync } from 'node:child_process';
import http from 'node:http';
import { Redis } from 'ioredis';
import { readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';

export const ROOT = new URL('..', import.meta.url).pathname;
const { dropDatabase: dropBenchDatabase } = await import(`${ROOT}dist/libs/db/index.js`);
const { deletePrefixedKeys } = await import(`${ROOT}dist/libs/jobs/index.js`);
const { SERVICE_NODE_FLAGS } = await import(`${ROOT}dist/libs/runtime/index.js`);
const PG = process.env.BENCH_DATABASE_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export function benchEnv(extra = {}) {
  const name = `ccb_${process.pid}_${randomBytes(3).toString('hex')}`;
  const db = new URL(PG);
  db.pathname = `/${name}`;
  return {
    name,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      DATABASE_URL: db.toString(),
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      REDIS_PREFIX: name,
      STORAGE_DRIVER: 'local',
      STORAGE_DIR: `/tmp/${name}/blobs`,
      SIGNING_SECRET: 'bench-signing-secret-0123456789',
      API_HOST: '127.0.0.1',
      API_PORT: '0',
      ...extra,
    },
  };
}

export function migrate(env) {
  execFileSync(process.execPath, [`${ROOT}dist/libs/db/migrate-cli.js`], { env, stdio: 'ignore' });
}

export function admin(env, ...args) {
  return JSON.parse(execFileSync(process.execPath, [`${ROOT}dist/apps/admin/src/main.js`, ...args], { env }).toString());
}

// Children still running when the benchmark exits, say on an error, are killed with it: left
// behind they would load the machine and skew every later measurement.
const running = new Set();
process.on('exit', () => running.forEach((child) => child.kill('SIGKILL')));

// BENCH_API_NODE_ARGS and BENCH_WORKER_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", add
// Node options to the API or worker processes a bench starts (a profile is written when one stops).
const nodeArgs = (name) => (process.env[name] ?? '').split(' ').filter(Boolean);
const extraNodeArgs = { 'apps/api/src/main.js': nodeArgs('BENCH_API_NODE_ARGS'), 'apps/worker/src/main.js': nodeArgs('BENCH_WORKER_NODE_ARGS') };

export function start(entry, env, readyMessage = 'listening') {
  const extra = extraNodeArgs[entry] ?? [];
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, ...extra, `${ROOT}dist/${entry}`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  child.once('exit', () => running.delete(child));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${entry} did not start`)), 30_000);
    const onLine = (line) => {
      if (process.env.BENCH_VERBOSE) console.error(`[${entry}] ${line}`);
      try {
        const msg = JSON.parse(line);
        if (msg.msg === readyMessage) {
          clearTimeout(timer);
          resolve({ child, port: msg.port, url: `http://127.0.0.1:${msg.port}`, pid: child.pid });
        }
      } catch {
        // not JSON
      }
    };
    createInterface({ input: child.stdout }).on('line', onLine);
    createInterface({ input: child.stderr }).on('line', onLine);
    child.on('exit', (code) => reject(new Error(`${entry} exited with ${code}`)));
  });
}

/** CPU time (user + system) a process has used so far, in ms. */
export function cpuMs(pid) {
  // Fields 14 and 15 of /proc/<pid>/stat, after the command name in parentheses; in clock ticks (100/s).
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * CPU time of a shared server's processes on the machine (by their command name), in ms, as a
 * counter: the difference between two readings is what they used in between. Run nothing else
 * against the server while measuring. A process that exits in between takes its time since the
 * first reading with it (short of the truth, never negative); one started in between counts whole.
 */
const serverCounters = new Map();
function serverCpuMs(comm) {
  const counter = serverCounters.get(comm) ?? { seen: new Map(), total: 0 };
  serverCounters.set(comm, counter);
  const alive = new Set();
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== comm) continue;
      const ms = cpuMs(pid);
      counter.total += ms - (counter.seen.get(pid) ?? 0);
      counter.seen.set(pid, ms);
      alive.add(pid);
    } catch {
      // gone meanwhile
    }
  }
  for (const pid of counter.seen.keys()) if (!alive.has(pid)) counter.seen.delete(pid);
  return counter.total;
}

/** PostgreSQL's CPU time (every backend), in ms, as a counter (see serverCpuMs). */
export const postgresCpuMs = () => serverCpuMs('postgres');

/** Redis's CPU time, in ms, as a counter (see serverCpuMs). */
export const redisCpuMs = () => serverCpuMs('redis-server');

/** CPU time every process of the machine has used so far, in ms (/proc/stat's busy ticks). */
export function machineBusyMs() {
  return machineTicks().busy * 10;
}

/** Busy and total CPU ticks of the whole machine so far (/proc/stat's first line). */
function machineTicks() {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const ticks = fields.map(Number);
  const idle = ticks[3] + ticks[4]; // idle and iowait
  const total = ticks.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/**
 * Waits until the machine's cores are mostly idle over a 200 ms window (at most `limitMs`): work
 * a process does after its answer (a store finishing an object, a collector) must not fall on the
 * next measured run. Resolves with the busy share of the last window.
 */
export async function quietMachine(limitMs = 10_000, busyShare = 0.15) {
  const until = Date.now() + limitMs;
  for (;;) {
    const a = machineTicks();
    await new Promise((r) => setTimeout(r, 200));
    const b = machineTicks();
    const share = (b.busy - a.busy) / Math.max(1, b.total - a.total);
    if (share <= busyShare || Date.now() > until) return share;
  }
}

export function rssBytes(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024;
}

/** Removes what a run leaves: its database, its Redis keys and its blob directory. */
export async function dropDatabase(env) {
  await dropBenchDatabase(env.DATABASE_URL);
  await deleteRedisPrefix(env.REDIS_URL, env.REDIS_PREFIX);
  execFileSync('rm', ['-rf', `/tmp/${env.REDIS_PREFIX}`]);
}

/** Deletes every Redis key under `prefix` (a bench's queue, events, limits). */
export async function deleteRedisPrefix(redisUrl, prefix) {
  const redis = new Redis(redisUrl);
  try {
    await deletePrefixedKeys(redis, prefix);
  } finally {
    redis.disconnect();
  }
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))];
}

export const median = (xs) => percentile([...xs].sort((a, b) => a - b), 0.5);

export function machine() {
  const cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown cpu';
  const cores = readFileSync('/proc/cpuinfo', 'utf8').match(/^processor/gm).length;
  const mem = Math.round(Number(/MemTotal:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) / 1024 / 1024);
  return `${cores} cores (${cpu}), ${mem} GiB, Node ${process.version}`;
}

// Load is sent with node:http on kept-alive sockets rather than fetch: the client shares the
// machine's two cores with everything it measures, and fetch costs it about twice the CPU.
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

/** One HTTP request; resolves with the status and the body as text. */
export function request(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(body);
    const req = http.request(url, { method, agent, headers: payload ? { ...headers, 'content-length': payload.length } : headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * The typed client (clients/typescript, built into dist/) over the same kept-alive node:http
 * sockets as `request`, so a bench that goes through it measures the service, not fetch.
 */
export async function benchClient(baseUrl, credentials) {
  const { ComfyCloud } = await import('../dist/clients/typescript/src/index.js');
  return new ComfyCloud({ baseUrl, fetch: agentFetch, ...credentials });
}

/** `fetch` for the client on the bench's agent: answers are read whole, as `request` reads them. */
async function agentFetch(req) {
  const payload = req.body ? Buffer.from(await req.arrayBuffer()) : undefined;
  const headers = Object.fromEntries(req.headers);
  const { res, body } = await new Promise((resolve, reject) => {
    const out = http.request(req.url, { method: req.method, agent, headers: payload ? { ...headers, 'content-length': payload.length } : headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ res, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    out.on('error', reject);
    out.end(payload);
  });
  const answer = new Headers();
  for (const [k, v] of Object.entries(res.headers)) for (const x of [v ?? []].flat()) answer.append(k, x);
  const empty = req.method === 'HEAD' || [204, 205, 304].includes(res.statusCode);
  return new Response(empty ? null : body, { status: res.statusCode, headers: answer });
}

/** One GET whose body is drained and counted, not kept (result media); resolves with status and size. */
export function download(url, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers }, (res) => {
      let bytes = 0;
      res.on('data', (c) => (bytes += c.length));
      res.on('end', () => resolve({ status: res.statusCode, bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** One JSON POST; resolves with its time in ms, rejects unless it is answered 200. */
export async function timedPost(url, body, headers = {}) {
  const started = performance.now();
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${url}`);
  return performance.now() - started;
}

export function closeRequests() {
  agent.destroy();
}

/** Stops processes started by `start` and waits until they exited (SIGKILL after 10 s). */
export async function stop(...processes) {
  await Promise.all(
    processes.map(({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) return undefined;
      return new Promise((resolve) => {
        const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill('SIGTERM');
      });
    }),
  );
}

/**
 * A fake synchronous partner: answers every call with the same JSON result after `delayMs`, plus
 * up to `spreadMs` more, drawn at random per call (set `partner.spreadMs` between rounds).
 */
export async function startFakePartner(delayMs) {
  const result = JSON.stringify({ images: [{ url: 'https://cdn.acme.example/bench.png', width: 1024, height: 1024 }], seed: 7 });
  const partner = { server: null, port: 0, spreadMs: 0 };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () =>
      setTimeout(
        () => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(result) });
          res.end(result);
        },
        delayMs + Math.random() * partner.spreadMs,
      ),
    );
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  partner.server = server;
  partner.port = server.address().port;
  return partner;
}

/**
 * `concurrency` callers send `warmup + total` calls back to back; resolves with the times of the
 * last `total`, sorted. The warm-up runs in the same stream rather than before a pause, so the
 * measured calls find warm connections and JIT-compiled code, and the callers no longer all start
 * in the same instant (a burst that only a benchmark's start produces).
 */
export async function measureCalls(call, concurrency, total, warmup) {
  const samples = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < warmup + total) {
        const measured = next++ >= warmup;
        const took = await call();
        if (measured) samples.push(took);
      }
    }),
  );
  return samples.sort((a, b) => a - b);
}
