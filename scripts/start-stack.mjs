// Starts sim-engine, partner simulator, worker, API and the webhooks process as child processes, prefixes their output,
// creates the demo account on first run and prints its key with ready curl lines, for the job API
// and for the model router. Ctrl-C stops them all. Writes only under .data/ (ignored by git).
import { spawn, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { loadConfig } from '#libs/config';
import { SERVICE_NODE_FLAGS } from '#libs/runtime';
import { DEV_KEYS, ROUTER_KEY_VARIABLES, SIM_PROVIDERS } from '../dist/apps/partner-sim/src/server.js';

const env = process.env;
const enginePort = env.SIM_ENGINE_PORT ?? '8188';
const simPort = env.PARTNER_SIM_PORT ?? '8190';
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

mkdirSync('.data', { recursive: true });

// The router's development secret: generated once, kept in .data/ (unless .env sets one).
const secretFile = '.data/router-secret';
let routerSecret = env.ROUTER_JWT_SECRET;
if (!routerSecret) {
  if (!existsSync(secretFile)) writeFileSync(secretFile, randomBytes(32).toString('base64url'), { mode: 0o600 });
  chmodSync(secretFile, 0o600);
  routerSecret = readFileSync(secretFile, 'utf8').trim();
}

// Every partner whose key .env leaves empty is pointed at the partner simulator, with the key the
// simulator expects; a partner whose key is set goes to its real endpoint (docs/router.md).
const simUrl = `http://127.0.0.1:${simPort}`;
const providerOf = (keyName) => (keyName.startsWith('kling') ? 'kling' : keyName);
const simulated = SIM_PROVIDERS.filter((p) => Object.entries(ROUTER_KEY_VARIABLES).every(([key, variable]) => providerOf(key) !== p || !env[variable]));
const routerEnv = { ROUTER_JWT_SECRET: routerSecret };
for (const [key, variable] of Object.entries(ROUTER_KEY_VARIABLES)) if (simulated.includes(providerOf(key))) routerEnv[variable] = DEV_KEYS[key];
// Entries of ROUTER_UPSTREAM_BASE_URLS set in .env win over the simulator's.
routerEnv.ROUTER_UPSTREAM_BASE_URLS = [...simulated.map((p) => `${p}=${simUrl}/${p}`), env.ROUTER_UPSTREAM_BASE_URLS ?? ''].filter(Boolean).join(',');

// Imports by URL and webhooks may reach servers on this machine (a model hub mirror, a receiver
// under development); production reaches public addresses only.
const outboundEnv = { OUTBOUND_ALLOW_LOOPBACK: env.OUTBOUND_ALLOW_LOOPBACK ?? 'true' };

// Tenants' model files: the worker links them from its cache into the engine's models folder,
// both under .data/ (one file system, so hard links).
const modelsDir = env.SIM_MODELS_DIR ?? '.data/engine-models';
mkdirSync(modelsDir, { recursive: true });
await start('sim-engine', 'dist/apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: enginePort, SIM_MODELS_DIR: modelsDir });
// Generations a quarter as long as the real ones: a video in about 10 s.
await start('partner-sim', 'dist/apps/partner-sim/src/main.js', { PARTNER_SIM_PORT: simPort, PARTNER_SIM_TIME_SCALE: env.PARTNER_SIM_TIME_SCALE ?? '0.25' });
await start('worker', 'dist/apps/worker/src/main.js', { ENGINE_URL: env.ENGINE_URL ?? `http://127.0.0.1:${enginePort}`, ENGINE_MODELS_DIR: env.ENGINE_MODELS_DIR ?? modelsDir });
// A development stack takes calls from pages on any origin (a front end on its own dev server);
// CORS_ALLOWED_ORIGINS, even empty, says otherwise. Production's default is no origin at all.
await start('api', 'dist/apps/api/src/main.js', { API_PORT: apiPort, CORS_ALLOWED_ORIGINS: env.CORS_ALLOWED_ORIGINS ?? '*', ...outboundEnv, ...routerEnv });
await start('webhooks', 'dist/apps/webhooks/src/main.js', { ...outboundEnv, PUBLIC_URL: env.PUBLIC_URL || `http://127.0.0.1:${apiPort}` });

const admin = (...args) => JSON.parse(execFileSync(process.execPath, ['dist/apps/admin/src/main.js', ...args], { env: { ...env, ...routerEnv } }).toString());

// The demo account is created once; its key is kept in .data/ (ignored by git) for later runs.
const demoFile = '.data/demo-account.json';
let demo;
if (existsSync(demoFile)) {
  demo = JSON.parse(readFileSync(demoFile, 'utf8'));
} else {
  demo = admin('account', 'create', '--name', 'demo', '--tier', 'pro', '--credits', '100000');
  writeFileSync(demoFile, JSON.stringify(demo, null, 2));
}
// Every start: the demo account may call the router, with a token valid for a day.
admin('account', 'set', '--account', demo.account_id, '--router-enabled', 'true');
const routerToken = admin('router', 'token', '--account', demo.account_id, '--ttl', '86400').token;

const base = `http://127.0.0.1:${apiPort}`;
const workflow = JSON.stringify({ workflow: JSON.parse(readFileSync('test/fixtures/text-to-image.json', 'utf8')) });
writeFileSync('.data/demo-request.json', workflow);
const routerCall = (model, body) => `  curl -s -X POST ${base}/v1/models/${model} -H "Authorization: Bearer ${routerToken}" -H "Content-Type: application/json" -d '${JSON.stringify(body)}'`;
const partners = simulated.length === SIM_PROVIDERS.length ? 'every partner simulated' : `simulated: ${simulated.join(', ') || 'none'}; the others are real`;
process.stdout.write(`
Comfy Cloud is running at ${base}
  console:      ${base}${basePath}/console/  (sign in with the API key below)
  demo account: ${demo.account_id}
  API key:      ${demo.api_key}
  router token: ${routerToken}
  (valid 24 h; partners at ${simUrl}, ${partners})

Run the stock text-to-image workflow and wait for it:
  curl -s -X POST ${base}/api/v2/jobs -H "Authorization: Bearer ${demo.api_key}" -H "Content-Type: application/json" -H "Prefer: wait=30" --data @.data/demo-request.json

Call a partner model through the router (an image; its URL is re-hosted, a signed URL valid 24 h):
${routerCall('recraft/recraftv3', { prompt: 'a lighthouse at dusk, flat illustration' })}

A submit-then-poll model (the router polls the provider and answers when the video is ready, about 10 s):
${routerCall('luma/ray-2', { model: 'ray-2', prompt: 'a slow pan over misty hills at dawn', duration: '5s' })}

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
