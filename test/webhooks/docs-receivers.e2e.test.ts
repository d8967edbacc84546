import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { ROOT } from '../support/processes.js';
import { TestStack } from '../support/stack.js';
import { ALLOW_LOOPBACK, startWebhooks } from '../support/webhooks.js';

// The two receivers docs/api.md shows (Node with the standardwebhooks library, Python with the
// standard library), run as written against real deliveries: each accepts what the service signs,
// under the old and the new secret during a rotation, and refuses a forged request.

/** The fenced block of `language` in docs/api.md whose first line names `file`. */
function docsBlock(language: string, file: string): string {
  const blocks = [...readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8').matchAll(/```(\w+)\n([\s\S]*?)```/g)];
  const found = blocks.find(([, lang, code]) => lang === language && code!.split('\n')[0]!.includes(file));
  if (!found) throw new Error(`docs/api.md has no ${language} block for ${file}`);
  return found[2]!;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

interface DocsReceiver {
  child: ChildProcess;
  port: number;
  lines: string[];
}

async function run(command: string, file: string, secret: string): Promise<DocsReceiver> {
  const port = await freePort();
  const child = spawn(command, [file], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: secret, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  child.stdout!.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
  child.stderr!.on('data', (d: Buffer) => lines.push(`stderr: ${d.toString()}`));
  await waitUntil(async () => (await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' }).then((r) => r.status).catch(() => 0)) === 400, 10_000, `${file} listening`);
  return { child, port, lines };
}

describe('the receivers of docs/api.md', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let account: { id: string; key: string };
  const receivers: DocsReceiver[] = [];
  const dir = path.join(ROOT, '.data', `docs-receivers-${process.pid}`);

  beforeAll(async () => {
    await stack.open();
    cloud = await startCloud(stack, { api: ALLOW_LOOPBACK });
    await startWebhooks(stack, cloud.api.url);
    account = await stack.account({ name: 'docs-receivers' });
    mkdirSync(dir, { recursive: true });
  }, 60_000);

  afterAll(async () => {
    for (const r of receivers) r.child.kill();
    rmSync(dir, { recursive: true, force: true });
    await stack.close();
  });

  it.each([
    ['node', 'js', 'receiver.mjs'],
    ['python3', 'python', 'receiver.py'],
  ])('%s: accepts signed events, before and after a rotation, and refuses a forged one', async (command, language, file) => {
    const v2 = (p: string, init: RequestInit = {}) => call(`${cloud.api.url}${p}`, { ...init, headers: { ...bearer(account.key), ...(init.headers as Record<string, string>) } });
    writeFileSync(path.join(dir, file), docsBlock(language, file));
    // The receiver needs the secret the endpoint is given, the endpoint the port the receiver
    // takes: made first with a placeholder URL (no event is sent before it is moved).
    const endpoint = (await v2('/api/v2/webhooks/endpoints', jsonInit('POST', { url: 'http://127.0.0.1:9/hook' }))).body;
    const started = await run(command === 'node' ? process.execPath : command, path.join(dir, file), endpoint.secret);
    receivers.push(started);
    await v2(`/api/v2/webhooks/endpoints/${endpoint.id}`, jsonInit('PATCH', { url: `http://127.0.0.1:${started.port}/hook` }));

    const job = await v2('/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(90) }, { prefer: 'wait=30' }));
    expect(job.body.status).toBe('succeeded');
    const rotated = (await v2(`/api/v2/webhooks/endpoints/${endpoint.id}/rotate-secret`, { method: 'POST' })).body;
    expect(rotated.secret).not.toBe(endpoint.secret);
    await v2(`/api/v2/webhooks/endpoints/${endpoint.id}/test`, { method: 'POST' });
    await waitUntil(async () => (await v2(`/api/v2/webhooks/endpoints/${endpoint.id}/deliveries`)).body.data.filter((d: { status: string }) => d.status !== 'pending').length === 2, 20_000, 'both deliveries ended');
    const deliveries = (await v2(`/api/v2/webhooks/endpoints/${endpoint.id}/deliveries`)).body.data;
    // The receiver holds the old secret: it accepts the event signed before the rotation and the
    // one signed with both secrets after it.
    for (const d of deliveries) expect({ event: d.event, status: d.status, response_code: d.response_code }).toEqual({ event: d.event, status: 'succeeded', response_code: 204 });
    expect(started.lines).toEqual(expect.arrayContaining([`${deliveries.find((d: { event: string }) => d.event === 'job.succeeded').id} job.succeeded succeeded`, expect.stringMatching(/ webhook\.test/)]));

    const forged = await fetch(`http://127.0.0.1:${started.port}/hook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'webhook-id': 'msg_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` },
      body: JSON.stringify({ type: 'job.succeeded', timestamp: new Date().toISOString(), data: { id: job.body.id, status: 'succeeded' } }),
    });
    expect(forged.status).toBe(400);
  }, 60_000);
});
