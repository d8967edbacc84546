import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { jest } from '@jest/globals';
import type { Page, Request } from 'playwright-core';
import { slowJob, startCloud, textToImage, type Cloud } from '../support/cloud.js';
import { bearer, call } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';
import { startPartnerSim, type PartnerSim } from '../../apps/partner-sim/src/server.js';
import { TEST_TIME_SCALE, writeCatalog } from '../router/router-world.js';
import { testPng } from '../v1/v1-world.js';
import { launchChromium, type Browser } from './support.js';

// The tenant console (apps/console), served by the API at /console/, driven in headless Chromium
// against the real stack (API, worker, simulated engine, the partner simulator): sign in, submit and
// watch a job, cancel one, upload and use an image, a validation error on its node, a router call,
// the account, a second tenant who sees nothing of the first; the page's CSP, and no request that
// leaves the API's origin. CONSOLE_SCREENSHOTS=<dir> also saves the main pages as PNGs there.

jest.setTimeout(60_000);

const SHOTS = process.env.CONSOLE_SCREENSHOTS;
const WIDE = { width: 1280, height: 900 };

describe('the tenant console in headless Chromium', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let partners: PartnerSim;
  let browser: Browser;
  let page: Page;
  let origin: string;
  let alice: { id: string; key: string };
  let bob: { id: string; key: string };
  let imageJob = '';
  let documentHeaders: Record<string, string> = {};
  const requests: Request[] = [];

  async function shot(name: string): Promise<void> {
    if (!SHOTS) return;
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  }

  /** A file dropped on an element, as a drag from the desktop delivers it. */
  async function drop(selector: string, name: string, type: string, bytes: Uint8Array): Promise<void> {
    await page.locator(selector).first().evaluate(
      (el: any, file) => {
        const g = globalThis as any;
        const transfer = new g.DataTransfer();
        transfer.items.add(new g.File([Uint8Array.from(atob(file.base64), (c) => c.charCodeAt(0))], file.name, { type: file.type }));
        el.dispatchEvent(new g.DragEvent('dragover', { dataTransfer: transfer, bubbles: true, cancelable: true }));
        el.dispatchEvent(new g.DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
      },
      { name, type, base64: Buffer.from(bytes).toString('base64') },
    );
  }

  async function signIn(key: string): Promise<void> {
    await page.getByLabel('API key').fill(key);
    await page.getByLabel('API key').press('Enter');
    await page.getByRole('navigation', { name: 'Console' }).waitFor();
  }

  async function pasteWorkflow(workflow: unknown): Promise<void> {
    await page.goto(`${origin}/console/#/submit`);
    await page.getByLabel('Workflow in the API format (JSON)').fill(JSON.stringify(workflow, null, 2));
  }

  /** Submits what the form holds and returns the id of the job page it opens. */
  async function submitAndOpen(): Promise<string> {
    await page.getByRole('button', { name: 'Submit', exact: true }).click();
    await page.waitForURL(/#\/jobs\/[0-9a-f-]{36}$/);
    return page.url().split('/').pop()!;
  }

  beforeAll(async () => {
    await stack.open();
    partners = await startPartnerSim({ timeScale: TEST_TIME_SCALE });
    const routerEnv = { ROUTER_CATALOG_FILE: writeCatalog(stack.blobDir), ...partners.routerEnv() };
    // Sampler steps of 60 ms: a 20-step job samples for over a second, long enough to show its
    // progress (announced at most every 500 ms) and a preview on the way.
    [cloud, browser] = await Promise.all([startCloud(stack, { api: routerEnv, engine: { SIM_STEP_MS: '60' } }), launchChromium()]);
    origin = cloud.api.url;
    alice = await stack.account({ name: 'alice' });
    bob = await stack.account({ name: 'bob' });
    await stack.accounts.setLimits(alice.id, { routerEnabled: true, routerMaxConcurrent: 8, routerSpendCapCents: 10_000, routerWindowCalls: 1000, routerWindowSeconds: 60 });
    await waitUntil(async () => (await call(`${origin}/api/object_info`, { headers: { 'x-api-key': alice.key } })).status === 200, 20_000, 'node definitions');
    page = await browser.newPage();
    await page.setViewportSize(WIDE);
    page.on('request', (r) => requests.push(r));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await partners?.stop();
    await stack.close();
  });

  it('signs in with an API key kept in the tab\'s sessionStorage only, refusing a wrong one', async () => {
    const response = await page.goto(`${origin}/console`);
    // /console redirects to /console/, so that the page's relative links resolve under any prefix.
    expect(response!.request().redirectedFrom()?.url()).toBe(`${origin}/console`);
    documentHeaders = await response!.allHeaders();
    expect(page.url()).toBe(`${origin}/console/`);
    await shot('sign-in');
    await page.getByLabel('API key').fill('cck_wrongkey_0000000000000000000000000000000000000000000');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'did not accept this API key' }).waitFor();
    await signIn(alice.key);
    await page.getByRole('heading', { name: 'Jobs' }).waitFor();
    await page.getByText('No jobs yet.').waitFor();
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([alice.key]);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await browser.context.cookies()).toEqual([]);
  });

  it('serves the page with a strict Content-Security-Policy, uncached, its hashed assets immutable', async () => {
    const csp = documentHeaders['content-security-policy'];
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toMatch(/script-src 'self' 'wasm-unsafe-eval'(;|$)/);
    expect(csp).not.toContain('unsafe-inline');
    expect(documentHeaders['cache-control']).toBe('no-store');
    const script = requests.find((r) => /\/console\/assets\/[^/]+\.js$/.test(r.url()));
    const scriptHeaders = await (await script!.response())!.allHeaders();
    expect(scriptHeaders['cache-control']).toBe('public, max-age=31536000, immutable');
    // The page itself carries no inline script for a CSP to allow.
    const html = await (await call(`${origin}/console/`)).text;
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  });

  it('submits the stock text-to-image workflow and shows the progress bar reach 100% and the image', async () => {
    await pasteWorkflow(textToImage(7, 20));
    await page.locator('li[data-node-id="3"]').getByText('KSampler').waitFor();
    await shot('submit');
    // Every value the bar takes, from the moment the job page opens.
    await page.evaluate(() => {
      const g = globalThis as any;
      const seen: number[] = (g.progressSeen = []);
      new g.MutationObserver(() => {
        const bar = g.document.getElementById('job-progress');
        if (bar && seen.at(-1) !== bar.value) seen.push(bar.value);
        if (g.document.querySelector('img.preview')?.src.startsWith('data:image/')) g.previewSeen = true;
      }).observe(g.document.body, { subtree: true, childList: true, characterData: true });
    });
    imageJob = await submitAndOpen();
    await page.waitForFunction(() => (globalThis as any).document.getElementById('job-progress')?.value === 1, undefined, { timeout: 30_000 });
    await page.locator('.job-status .badge', { hasText: 'succeeded' }).waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('progress-text').textContent()).toBe('100%');
    const seen = (await page.evaluate(() => (globalThis as any).progressSeen)) as number[];
    expect({ seen, between: seen.some((v) => v > 0 && v < 1), last: seen.at(-1) }).toEqual({ seen, between: true, last: 1 });
    expect(await page.evaluate(() => (globalThis as any).previewSeen)).toBe(true);
    const image = page.locator('.gallery img').first();
    await image.waitFor();
    await page.waitForFunction(() => {
      const img = (globalThis as any).document.querySelector('.gallery img');
      return !!img && img.complete && img.naturalWidth === 64;
    });
    await page.getByText('Show the workflow this job ran').click();
    await page.locator('pre.code', { hasText: '"KSampler"' }).waitFor();
    await page.locator('#log-h').waitFor();
    await shot('job');
  });

  it('reads the workflow out of a PNG saved by the service and dropped on the submit page', async () => {
    const job = (await call(`${origin}/api/v2/jobs/${imageJob}`, { headers: bearer(alice.key) })).body;
    const png = new Uint8Array(await (await fetch(job.outputs[0].url)).arrayBuffer());
    await page.goto(`${origin}/console/#/submit`);
    await drop('.dropzone', 'ComfyUI_00001_.png', 'image/png', png);
    await page.getByText('Read the workflow embedded in ComfyUI_00001_.png.').waitFor();
    const text = await page.getByLabel('Workflow in the API format (JSON)').inputValue();
    expect(JSON.parse(text)['3']).toMatchObject({ class_type: 'KSampler', inputs: { seed: 7, steps: 20 } });
  });

  it('shows a validation error next to the node it names, and submits nothing', async () => {
    const bad = textToImage(1, 4);
    bad['3'].inputs.sampler_name = 'no_such_sampler';
    await pasteWorkflow(bad);
    await page.getByRole('button', { name: 'Submit', exact: true }).click();
    const errors = page.locator('li[data-node-id="3"] .node-errors');
    await errors.waitFor();
    expect(await errors.textContent()).toContain('sampler_name');
    expect(await page.locator('.node-errors').count()).toBe(1);
    expect(page.url()).toMatch(/#\/submit$/);
    // The service's message lists every allowed sampler in one unbroken line: it wraps.
    expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).innerWidth)).toBeLessThanOrEqual(0);
    await shot('validation-error');
  });

  it('cancels a long job from its page', async () => {
    await pasteWorkflow(slowJob(120_000));
    const id = await submitAndOpen();
    await page.locator('.job-status .badge', { hasText: 'running' }).waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.locator('.job-status .badge', { hasText: /^canceled$/ }).waitFor({ timeout: 20_000 });
    expect((await call(`${origin}/api/v2/jobs/${id}`, { headers: bearer(alice.key) })).body.status).toBe('canceled');
    await page.getByRole('button', { name: 'Cancel job' }).waitFor({ state: 'detached' });
  });

  it('uploads an image by drag and drop, skips the bytes the second time, and runs a workflow on it', async () => {
    const png = testPng(16, 12, 99);
    const posts = () => requests.filter((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/api/v2/assets').length;
    await page.goto(`${origin}/console/#/assets`);
    await drop('.dropzone', 'photo.png', 'image/png', png);
    await page.locator('[data-upload="photo.png"] .upload-state', { hasText: 'Uploaded.' }).waitFor();
    expect(posts()).toBe(1);
    // The same bytes under another name: hashed in the page, found, recorded without an upload.
    await drop('.dropzone', 'again.png', 'image/png', png);
    await page.locator('[data-upload="again.png"] .upload-state', { hasText: 'Already stored' }).waitFor();
    expect(posts()).toBe(1);
    expect(requests.some((r) => r.method() === 'HEAD' && r.url().includes('/api/v2/assets/by-hash/blake3%3A'))).toBe(true);
    expect(requests.some((r) => r.method() === 'POST' && r.url().endsWith('/api/v2/assets/from-hash'))).toBe(true);
    await page.locator('.asset-grid [data-asset-id]').nth(1).waitFor();
    await shot('assets');

    await page.locator('[data-upload="photo.png"]').getByRole('link', { name: 'Use it in a new job' }).click();
    await page.waitForURL(/#\/submit\?image=photo\.png$/);
    const workflow = JSON.parse(await page.getByLabel('Workflow in the API format (JSON)').inputValue());
    expect(workflow['1']).toEqual({ class_type: 'LoadImage', inputs: { image: 'photo.png' } });
    await submitAndOpen();
    await page.locator('.job-status .badge', { hasText: 'succeeded' }).waitFor({ timeout: 30_000 });
    await page.waitForFunction(() => {
      const img = (globalThis as any).document.querySelector('.gallery img');
      return !!img && img.complete && img.naturalWidth === 16;
    });
  });

  it('lists the jobs newest first, filters them by status and updates them live', async () => {
    await page.goto(`${origin}/console/#/jobs`);
    const rows = page.locator('table.jobs tbody tr');
    await rows.nth(2).waitFor();
    const statuses = await page.locator('table.jobs tbody tr .badge').allTextContents();
    expect(statuses.slice(0, 3)).toEqual(['succeeded', 'canceled', 'succeeded']);
    await page.getByLabel('Status').selectOption('canceled');
    await page.waitForURL(/status=canceled$/);
    await page.waitForFunction(() => (globalThis as any).document.querySelectorAll('table.jobs tbody tr').length === 1);
    await page.getByLabel('Status').selectOption('');
    await rows.nth(2).waitFor();
    // A job submitted elsewhere appears without a reload.
    const before = await rows.count();
    const other = await call(`${origin}/api/v2/jobs`, { method: 'POST', headers: { ...bearer(alice.key), 'content-type': 'application/json' }, body: JSON.stringify({ workflow: textToImage(3, 2) }) });
    await page.locator(`tr[data-job-id="${other.body.id}"]`).waitFor({ timeout: 10_000 });
    expect(await rows.count()).toBe(before + 1);
    await page.locator(`tr[data-job-id="${other.body.id}"] .badge`, { hasText: 'succeeded' }).waitFor({ timeout: 20_000 });
    await shot('jobs');
  });

  it('shows the balance, the recent charges, the limits and what is in use', async () => {
    await page.goto(`${origin}/console/#/account`);
    const balance = (await call(`${origin}/api/v2/account`, { headers: bearer(alice.key) })).body.credit_balance as number;
    const shown = page.getByTestId('balance');
    await shown.waitFor();
    expect((await shown.textContent())!.replace(/\D/g, '')).toBe(String(balance));
    await page.locator('table.charges').getByRole('link', { name: new RegExp(`job ${imageJob.slice(0, 8)}`) }).waitFor();
    await page.getByRole('row', { name: /Jobs running at once/ }).waitFor();
    await shot('account');
  });

  it('runs a router model from a form made from its input schema, and explains a failure', async () => {
    await page.goto(`${origin}/console/#/router`);
    await page.getByRole('link', { name: 'recraft/recraftv3' }).click();
    await page.getByLabel(/^prompt/).fill('a lighthouse at dusk');
    // The schema's enum is a list, its integer a number field with the schema's bounds.
    expect(await page.getByLabel(/^style/).locator('option').allTextContents()).toEqual(expect.arrayContaining(['realistic_image', 'vector_illustration']));
    expect(await page.getByLabel(/^n\b/).getAttribute('max')).toBe('6');
    await page.getByRole('button', { name: 'Run the model' }).click();
    const result = page.locator('section[aria-labelledby="result-h"]');
    await result.waitFor({ timeout: 20_000 });
    expect(await result.locator('pre').textContent()).toContain('"data"');
    // The router re-hosted the partner's image: the page shows it from the API's own origin.
    const image = result.locator('img');
    await image.waitFor();
    expect(new URL((await image.getAttribute('src'))!, origin).origin).toBe(new URL(origin).origin);
    await shot('router');

    await page.getByLabel(/^prompt/).fill('a cat [[refuse]]');
    await page.getByRole('button', { name: 'Run the model' }).click();
    const failure = page.getByRole('alert').filter({ hasText: 'content_policy_violation' });
    await failure.waitFor({ timeout: 20_000 });
    expect(await failure.textContent()).toContain('refused the input on content-policy grounds');
  });

  it('is usable at phone width and labels every control', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const route of ['jobs', 'submit', 'assets', 'account', 'router']) {
      await page.goto(`${origin}/console/#/${route}`);
      await page.locator('h1').waitFor();
      await page.waitForLoadState('networkidle');
      const layout = await page.evaluate(() => {
        const g = globalThis as any;
        const controls: any[] = [...g.document.querySelectorAll('input, select, textarea, button')];
        return {
          overflow: g.document.documentElement.scrollWidth - g.innerWidth,
          unlabelled: controls
            .filter((el) => !el.labels?.length && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby') && !(el.textContent ?? '').trim())
            .map((el) => String(el.outerHTML).slice(0, 80)),
        };
      });
      expect({ route, ...layout }).toEqual({ route, overflow: 0, unlabelled: [] });
    }
    if (SHOTS) {
      await page.goto(`${origin}/console/#/jobs`);
      await page.locator('h1').waitFor();
      await shot('phone-jobs');
    }
    await page.setViewportSize(WIDE);
  });

  it('signs out, and shows a second tenant none of the first one\'s jobs or assets', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await signIn(bob.key);
    await page.getByText('No jobs yet.').waitFor();
    expect(await page.locator('table.jobs').count()).toBe(0);
    await page.goto(`${origin}/console/#/assets`);
    await page.getByText('No assets here yet.').waitFor();
    const html = await page.content();
    expect(html).not.toContain(imageJob);
    await page.goto(`${origin}/console/#/jobs/${imageJob}`);
    await page.getByRole('alert').filter({ hasText: 'not_found' }).waitFor();
  });

  it('reached nothing beyond the API\'s origin', () => {
    expect(requests.length).toBeGreaterThan(20);
    const elsewhere = [...browser.requested, ...requests.map((r) => r.url())].filter((url) => !url.startsWith(`${origin}/`) && !/^(data|blob|about):/.test(url));
    expect(elsewhere).toEqual([]);
  });
});
