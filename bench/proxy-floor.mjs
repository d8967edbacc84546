// The floor under bench/router.mjs: what any proxy adds on this machine, measured the same way.
//
//   node bench/proxy-floor.mjs
//
// A bare node:http proxy (no framework, no auth, no validation, no records) in a process of its
// own, in front of the same fake partner (answers after 50 ms), first as it is, then with one
// Redis round trip before each forward and one after (the router's slot: take, then release).
// Prints the latency each adds over calling the partner directly, at 1 and at 64 callers, and the
// proxy's CPU time per call (compare with the API's in bench/router.mjs).
// Needs Redis (REDIS_URL; local default).
import { fork } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { closeRequests, cpuMs, measureCalls, percentile, startFakePartner, timedPost } from './support.mjs';

const DELAY_MS = 50;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

if (process.argv[2] === 'proxy') {
  const [, , , partnerPort, withRedis] = process.argv;
  const { Redis } = await import('ioredis');
  const redis = withRedis === 'redis' ? new Redis(REDIS_URL) : null;
  const key = `proxy-floor:${process.pid}`;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', async () => {
      if (redis) await redis.incr(key);
      const body = Buffer.concat(chunks);
      const headers = { 'content-type': 'application/json', 'content-length': body.length };
      const upstream = http.request({ host: '127.0.0.1', port: Number(partnerPort), path: req.url, method: 'POST', agent, headers }, (answer) => {
        const parts = [];
        answer.on('data', (chunk) => parts.push(chunk));
        answer.on('end', () => {
          redis?.decr(key);
          const out = Buffer.concat(parts);
          res.writeHead(answer.statusCode ?? 502, { 'content-type': 'application/json', 'content-length': out.length });
          res.end(out);
        });
      });
      upstream.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  process.on('message', async () => {
    await redis?.del(key);
    process.exit(0);
  });
  server.listen(0, '127.0.0.1', () => process.send(server.address().port));
} else {
  const { server: partner, port: partnerPort } = await startFakePartner(DELAY_MS);

  const BODY = JSON.stringify({ prompt: 'a lighthouse at dusk', num_inference_steps: 4, seed: 7 });
  const once = (port) => timedPost(`http://127.0.0.1:${port}/v1/run/flux-schnell`, BODY);
  // As in bench/router.mjs: ten calls per caller of warm-up in the same stream, then measured.
  const run = (port, concurrency, total) => measureCalls(() => once(port), concurrency, total, concurrency * 10);
  const pct = (sorted, p) => percentile(sorted, p / 100);
  const WARMUP_CALLS = Number(process.env.BENCH_WARMUP_CALLS ?? 5000);

  console.log(`\nBare proxy added latency (partner answers after ${DELAY_MS} ms; times in ms)\n`);
  console.log('proxy                      callers  added p50  added p99  proxy CPU/call');
  for (const variant of ['bare', 'redis']) {
    const child = fork(fileURLToPath(import.meta.url), ['proxy', String(partnerPort), variant]);
    const port = await new Promise((resolve) => child.once('message', resolve));
    // As in bench/router.mjs: the proxy's code path is run hot before anything is measured.
    await measureCalls(() => once(port), 64, WARMUP_CALLS, 0);
    for (const [concurrency, total] of [
      [1, 300],
      [64, 6400],
    ]) {
      const d = await run(partnerPort, concurrency, total);
      const cpuBefore = cpuMs(child.pid);
      const r = await run(port, concurrency, total);
      const cpuPerCall = (cpuMs(child.pid) - cpuBefore) / (total + concurrency * 10);
      const label = variant === 'bare' ? 'node:http only' : 'with a Redis round trip';
      console.log(`${label.padEnd(25)}  ${String(concurrency).padStart(7)}  ${(pct(r, 50) - pct(d, 50)).toFixed(2).padStart(9)}  ${(pct(r, 99) - pct(d, 99)).toFixed(2).padStart(9)}  ${cpuPerCall.toFixed(2).padStart(14)}`);
    }
    child.send('stop');
    await new Promise((resolve) => child.once('exit', resolve));
  }
  closeRequests();
  partner.close();
}
