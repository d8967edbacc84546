// Streams a 1 GiB upload through POST /api/v2/assets and reports how much the API process's
// resident memory grew meanwhile. The body is generated on the fly and hashed on the client too,
// so the server's blake3 can be checked against it.
import http from 'node:http';
import { Blake3Hasher } from '@napi-rs/blake-hash';
import { admin, benchEnv, dropDatabase, machine, migrate, rssBytes, start, stop } from './support.mjs';

const SIZE = Number(process.env.UPLOAD_BYTES ?? 1024 ** 3);
const CHUNK = 1024 * 1024;
const { env } = benchEnv({ MAX_UPLOAD_BYTES: String(SIZE + 1024 * 1024) });
migrate(env);
const api = await start('apps/api/src/main.js', env);
const { api_key: key } = admin(env, 'account', 'create', '--name', 'bench', '--credits', '1');

const boundary = 'benchboundary7MA4YWxkTrZu0gW';
const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
const hasher = new Blake3Hasher();
const block = Buffer.alloc(CHUNK);
for (let i = 0; i < CHUNK; i++) block[i] = (i * 2654435761) >>> 24;

await new Promise((r) => setTimeout(r, 500));
const baseline = rssBytes(api.pid);
let peak = baseline;
const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(api.pid))), 50);
const started = Date.now();
const result = await new Promise((resolve, reject) => {
  const req = http.request(`${api.url}/api/v2/assets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': head.length + SIZE + tail.length },
  });
  req.on('response', (res) => {
    let body = '';
    res.on('data', (d) => (body += d));
    res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(body) }));
  });
  req.on('error', reject);
  let sent = 0;
  req.write(head);
  const pump = () => {
    while (sent < SIZE) {
      const n = Math.min(CHUNK, SIZE - sent);
      const piece = n === CHUNK ? block : block.subarray(0, n);
      // Vary the bytes so the store cannot cheat with repeated blocks.
      piece[0] = sent / CHUNK;
      hasher.update(piece);
      sent += n;
      if (!req.write(piece)) return req.once('drain', pump);
    }
    req.end(tail);
  };
  pump();
});
clearInterval(sampler);
const seconds = (Date.now() - started) / 1000;
const expected = `blake3:${hasher.digest('hex')}`;
await stop(api);
await dropDatabase(env);

const growth = (peak - baseline) / 1024 / 1024;
console.log(`machine: ${machine()}`);
console.log(`upload of ${(SIZE / 1024 ** 3).toFixed(2)} GiB: HTTP ${result.status}, ${(SIZE / 1024 / 1024 / seconds).toFixed(0)} MiB/s`);
console.log(`hash matches the client's blake3: ${result.body.hash === expected}`);
console.log(`API RSS: baseline ${(baseline / 1024 / 1024).toFixed(1)} MiB, peak ${(peak / 1024 / 1024).toFixed(1)} MiB, growth ${growth.toFixed(1)} MiB (target < 64 MiB)`);
if (result.status !== 201 || result.body.hash !== expected || growth >= 64) process.exitCode = 1;
