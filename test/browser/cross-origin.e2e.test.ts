import { readFileSync } from 'node:fs';
import type { Page, Response } from 'playwright-core';
import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { call } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';
import { isLocalUrl, launchChromium, serveOrigin, type Browser, type Origin } from './support.js';

const PAGE = readFileSync(new URL('./pages/cross-origin.html', import.meta.url), 'utf8');

/** Opens the page with its settings, waits until it has run, and returns what it saw. */
async function runPage(page: Page, origin: Origin, settings: Record<string, unknown>): Promise<Record<string, any>> {
  await page.goto(`${origin.url}/app.html#${encodeURIComponent(JSON.stringify(settings))}`);
  await page.waitForFunction(() => (globalThis as { done?: boolean }).done === true, undefined, { timeout: 30_000 });
  return page.evaluate(() => (globalThis as unknown as { results: Record<string, any> }).results);
}

describe('a web page on another origin, in headless Chromium', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let browser: Browser;
  let app: Origin;
  let stranger: Origin;
  let alice: { id: string; key: string };

  beforeAll(async () => {
    const files = { '/app.html': { type: 'text/html; charset=utf-8', body: PAGE } };
    // Two more loopback origins beside the API's 127.0.0.1: one it lists, one it does not.
    [app, stranger] = await Promise.all([serveOrigin('127.0.0.2', files), serveOrigin('127.0.0.3', files)]);
    await stack.open();
    [cloud, browser] = await Promise.all([startCloud(stack, { api: { CORS_ALLOWED_ORIGINS: app.url } }), launchChromium()]);
    alice = await stack.account({ name: 'alice' });
    await waitUntil(async () => (await call(`${cloud.api.url}/api/object_info`, { headers: { 'x-api-key': alice.key } })).status === 200, 20_000, 'node definitions');
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await Promise.all([app?.close(), stranger?.close()]);
    await stack.close();
  });

  it('calls v2 and v1 from a listed origin: submits, polls, streams, downloads, reads headers and errors', async () => {
    const page = await browser.newPage();
    const objectInfo = new Promise<Response>((resolve) => page.on('response', (r) => r.url().endsWith('/api/object_info') && resolve(r)));
    const seen = await runPage(page, app, { api: cloud.api.url, key: alice.key, workflow: tinyImage(3), mode: 'allowed' });
    expect(seen.failure).toBeUndefined();

    expect(seen.submit).toMatchObject({ status: 201, requestId: 'page-submit-1', preferenceApplied: 'wait=1' });
    expect(seen.poll).toMatchObject({ status: 'succeeded', outputs: 1 });
    expect(seen.poll.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen.events).toMatchObject({ status: 200, contentType: expect.stringMatching(/^text\/event-stream/) });
    expect(seen.events.statuses.at(-1)).toBe('succeeded');
    expect(seen.output).toMatchObject({ status: 200, type: 'image/png', disposition: expect.stringContaining('.png'), etag: expect.stringMatching(/^"[0-9a-f]{64}"$/) });
    expect(seen.output.bytes).toBeGreaterThan(0);
    expect(seen.objectInfo).toMatchObject({ status: 200, hasKSampler: true });
    expect(seen.objectInfo.classes).toBeGreaterThan(10);
    expect(seen.notFound).toMatchObject({ status: 404, code: 'not_found', requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(seen.unauthorized).toMatchObject({ status: 401, code: 'unauthorized' });
    expect(seen.socket).toEqual({ opened: true, first: 'status' });

    // What went over the wire, as the browser saw it: object_info came compressed as it asked.
    const response = await objectInfo;
    const accepted = (await response.request().allHeaders())['accept-encoding'] ?? '';
    const encoding = (await response.allHeaders())['content-encoding'];
    expect(accepted).toMatch(/gzip/);
    expect(encoding).toBe(accepted.includes('br') ? 'br' : 'gzip');
    await page.close();
  });

  it('gives a page from an origin the API does not list nothing: no answer, no socket', async () => {
    const page = await browser.newPage();
    const seen = await runPage(page, stranger, { api: cloud.api.url, key: alice.key, mode: 'stranger' });
    expect(seen.failure).toBeUndefined();
    // The browser withholds the answers and says only that the fetch failed.
    expect(seen.v2).toMatchObject({ error: 'TypeError' });
    expect(seen.document).toMatchObject({ error: 'TypeError' });
    expect(seen.socket).toEqual({ opened: false, reason: 'error' });
    await page.close();
  });

  it('reached nothing beyond this machine', () => {
    expect(browser.requested.length).toBeGreaterThan(0);
    expect(browser.requested.filter((url) => !isLocalUrl(url))).toEqual([]);
  });
});
