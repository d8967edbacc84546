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

// Tenants' model files: the worker links them from its cache into the engine's models folder,
// both under .data/ (one file system, so hard links).
const modelsDir = env.SIM_MODELS_DIR ?? '.data/engine-models';
mkdirSync(modelsDir, { recursive: true });
await start('sim-engine', 'dist/apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: enginePort, SIM_MODELS_DIR: modelsDir });
await start('worker', 'dist/apps/worker/src/main.js', { ENGINE_URL: env.ENGINE_URL ?? `http://127.0.0.1:${enginePort}`, ENGINE_MODELS_DIR: env.ENGINE_MODELS_DIR ?? modelsDir });
// A development stack takes calls from pages on any origin (a front end on its own dev server);
// CORS_ALLOWED_ORIGINS, even empty, says otherwise. Production's default is no origin at all.
// Imports by URL may reach servers on this machine (a model hub mirror, a test server).
await start('api', 'dist/apps/api/src/main.js', { API_PORT: apiPort, CORS_ALLOWED_ORIGINS: env.CORS_ALLOWED_ORIGINS ?? '*', OUTBOUND_ALLOW_LOOPBACK: env.OUTBOUND_ALLOW_LOOPBACK ?? 'true' });

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
  demo account: ${demo.account_id}
  API key:      ${demo.api_key}

Run the stock text-to-image workflow and wait for it:
  curl -s -X POST ${base}/api/v2/jobs -H "Authorization: Bearer ${demo.api_key}" -H "Content-Type: application/json" -H "Prefer: wait=30" --data @.data/demo-request.json

Ctrl-C stops everything.
`);
