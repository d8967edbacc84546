// Starts sim-engine, worker and API as child processes, prefixes their output, creates the demo
// account on first run and prints its key with a ready curl line. Ctrl-C stops all three.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { loadConfig } from '#libs/config';
import { SERVICE_NODE_FLAGS } from '#libs/runtime';

const env = process.env;
const enginePort = env.SIM_ENGINE_PORT ?? '8188';
// The API's own default: 8080, or 8189 for the self-hosted surface (next to an engine on 8188).
const apiPort = String(loadConfig(env).api.port);
const basePath = loadConfig(env).api.basePath;
const children = [];

function start(name, entry, extra) {
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, entry], { env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const ready = new Promise((resolve, reject) => {
    const onLine = (line) => {
      process.stdout.write(`[${name}] ${line}\n`);
      if (/"msg":"(listening|ready)"/.test(line) && (name !== 'worker' || line.includes('"ready"'))) resolve();
    };
    createInterface({ input: child.stdout }).on('line', onLine);
    createInterface({ input: child.stderr }).on('line', onLine);
    child.on('exit', (code) => {
      reject(new Error(`${name} exited with ${code}`));
      stopAll(code ?? 1);
    });
  });
  return ready;
}

let stopping = false;
function stopAll(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  setTimeout(() => process.exit(code), 3000).unref();
}
process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));

await start('sim-engine', 'dist/apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: enginePort });
await start('worker', 'dist/apps/worker/src/main.js', { ENGINE_URL: env.ENGINE_URL ?? `http://127.0.0.1:${enginePort}` });
// A development stack takes calls from pages on any origin (a front end on its own dev server);
// CORS_ALLOWED_ORIGINS, even empty, says otherwise. Production's default is no origin at all.
await start('api', 'dist/apps/api/src/main.js', { API_PORT: apiPort, CORS_ALLOWED_ORIGINS: env.CORS_ALLOWED_ORIGINS ?? '*' });

// The demo account is created once; its key is kept in .data/ (ignored by git) for later runs.
const demoFile = '.data/demo-account.json';
let demo;
if (existsSync(demoFile)) {
  demo = JSON.parse(readFileSync(demoFile, 'utf8'));
} else {
  const out = execFileSync(process.execPath, ['dist/apps/admin/src/main.js', 'account', 'create', '--name', 'demo', '--tier', 'pro', '--credits', '100000'], { env });
  demo = JSON.parse(out.toString());
  mkdirSync('.data', { recursive: true });
  writeFileSync(demoFile, JSON.stringify(demo, null, 2));
}
const base = `http://127.0.0.1:${apiPort}`;
const workflow = JSON.stringify({ workflow: JSON.parse(readFileSync('test/fixtures/text-to-image.json', 'utf8')) });
writeFileSync('.data/demo-request.json', workflow);
process.stdout.write(`
Comfy Cloud is running at ${base}
  console:      ${base}${basePath}/console/  (sign in with the API key below)
  demo account: ${demo.account_id}
  API key:      ${demo.api_key}

Run the stock text-to-image workflow and wait for it:
  curl -s -X POST ${base}/api/v2/jobs -H "Authorization: Bearer ${demo.api_key}" -H "Content-Type: application/json" -H "Prefer: wait=30" --data @.data/demo-request.json

Ctrl-C stops everything.
`);

// A new user who opens the console and signs in sees a finished job at once: the demo account gets
// the stock workflow's job whenever it has none (the first start, or once the last one expired).
try {
  const headers = { authorization: `Bearer ${demo.api_key}`, 'content-type': 'application/json' };
  const listed = await (await fetch(`${base}${basePath}/api/v2/jobs?limit=1`, { headers })).json();
  if (Array.isArray(listed.data) && listed.data.length === 0) {
    const job = await (await fetch(`${base}${basePath}/api/v2/jobs`, { method: 'POST', headers: { ...headers, prefer: 'wait=60' }, body: workflow })).json();
    if (job.id) process.stdout.write(`The demo job ${job.id} is ${job.status}: ${base}${basePath}/console/#/jobs/${job.id}\n`);
  }
} catch (err) {
  process.stdout.write(`The demo job was not submitted (${err.message}); submit one with the curl line above.\n`);
}
