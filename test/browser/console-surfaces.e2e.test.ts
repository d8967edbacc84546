import { jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import { call } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';
import { launchChromium, type Browser } from './support.js';

// The console on every surface: under BASE_PATH, under a deployment's prefix (its API calls go
// through that prefix, so it sees that deployment's jobs), and on the self-hosted surface with
// and without its token. Each is signed into in headless Chromium; every request the page makes
// stays under the prefix it was opened by.

jest.setTimeout(60_000);

describe('the console under BASE_PATH, a deployment prefix, and on the self-hosted surface', () => {
  const stack = new TestStack('local');
  let browser: Browser;
  let cloud: RunningProcess;
  let deployment: RunningProcess;
  let open: RunningProcess;
  let guarded: RunningProcess;
  let alice: { id: string; key: string };
  const TOKEN = 'self-hosted-token-0123456789abcdef';

  beforeAll(async () => {
    await stack.open();
    [cloud, deployment, open, guarded, browser] = await Promise.all([
      stack.startApi({ BASE_PATH: '/gw' }),
      stack.startApi({ BASE_PATH: '/gw', SURFACE: 'deployment', DEPLOYMENT_DOMAIN: 'deploy.test' }),
      stack.startApi({ SURFACE: 'self-hosted' }),
      stack.startApi({ SURFACE: 'self-hosted', SELF_HOSTED_TOKEN: TOKEN }),
      launchChromium(),
    ]);
    alice = await stack.account({ name: 'alice' });
    await stack.db.deployment.create({ data: { id: 'alice-app', accountId: alice.id, workflow: {}, status: 'ready' } });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await stack.close();
  });

  /** Opens the console at `pageUrl`, signs in with `key`, and returns the page and every URL it asked for. */
  async function signInAt(pageUrl: string, key: string): Promise<{ page: Page; urls: string[] }> {
    const page = await browser.newPage();
    const urls: string[] = [];
    page.on('request', (r) => urls.push(r.url()));
    await page.goto(pageUrl);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    return { page, urls };
  }

  it('serves the page under BASE_PATH, with the redirect and the headers, and only there', async () => {
    const redirect = await call(`${cloud.url}/gw/console`);
    expect([redirect.status, redirect.headers.get('location')]).toEqual([308, 'console/']);
    const html = await call(`${cloud.url}/gw/console/`);
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toMatch(/^text\/html/);
    expect(html.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(html.headers.get('cache-control')).toBe('no-store');
    const asset = /src="\.\/(assets\/[^"]+\.js)"/.exec(html.text)![1]!;
    const script = await call(`${cloud.url}/gw/console/${asset}`);
    expect([script.status, script.headers.get('cache-control')]).toEqual([200, 'public, max-age=31536000, immutable']);
    expect((await call(`${cloud.url}/console/`)).status).toBe(404);
    const missing = await call(`${cloud.url}/gw/console/assets/none-00000000.js`);
    expect([missing.status, missing.body.error?.code]).toEqual([404, 'not_found']);
    // Nothing of the page asks for a credential.
    expect(html.headers.get('set-cookie')).toBeNull();
  });

  it('signs in under BASE_PATH and calls the API under it', async () => {
    const { page, urls } = await signInAt(`${cloud.url}/gw/console`, alice.key);
    await page.getByText('No jobs yet.').waitFor();
    const api = urls.filter((u) => u.includes('/api/'));
    expect(api.length).toBeGreaterThan(0);
    expect(api.filter((u) => !u.startsWith(`${cloud.url}/gw/api/v2/`))).toEqual([]);
    await page.close();
  });

  it('under a deployment\'s prefix, calls that deployment\'s API', async () => {
    const { page, urls } = await signInAt(`${deployment.url}/gw/deployment/alice-app/console/`, alice.key);
    await page.getByText('No jobs yet.').waitFor();
    const jobLists = urls.filter((u) => u.includes('/api/v2/jobs'));
    expect(jobLists.length).toBeGreaterThan(0);
    expect(jobLists.every((u) => u.startsWith(`${deployment.url}/gw/deployment/alice-app/api/v2/jobs`))).toBe(true);
    await page.close();
  });

  it('on the self-hosted surface without a token, signs in with an empty key', async () => {
    const { page } = await signInAt(`${open.url}/console/`, '');
    await page.getByText('No jobs yet.').waitFor();
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.length)).toBe(1);
    await page.close();
  });

  it('on the self-hosted surface with a token, takes the token and refuses no key', async () => {
    const refused = await signInAt(`${guarded.url}/console/`, '');
    await refused.page.getByRole('alert').filter({ hasText: 'This server needs an API key.' }).waitFor();
    await refused.page.close();
    const { page } = await signInAt(`${guarded.url}/console/`, TOKEN);
    await page.getByText('No jobs yet.').waitFor();
    await page.close();
  });
});
