import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`): the suites never download a browser. */
export const CHROMIUM_PATH = '/usr/bin/chromium';

// Headless, and quiet: no sandbox (the suites may run as root), no GPU, no QUIC, and none of the
// background traffic (updates, sync, first-run pages) a browser sends on its own.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A headless Chromium with a fresh profile of its own, removed on close. */
export interface Browser {
  context: BrowserContext;
  newPage(): Promise<Page>;
  /** Every URL the browser asked for, to prove it reached nothing beyond loopback. */
  readonly requested: string[];
  close(): Promise<void>;
}

export async function launchChromium(): Promise<Browser> {
  const profile = await mkdtemp(path.join(tmpdir(), 'cc-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 });
  } catch (err) {
    await rm(profile, { recursive: true, force: true });
    throw err;
  }
  const requested: string[] = [];
  context.on('request', (request) => requested.push(request.url()));
  return {
    context,
    requested,
    newPage: () => context.newPage(),
    async close() {
      await context.close();
      // Chromium's helper processes can still be writing the profile just after the close resolves
      // (ENOTEMPTY on rmdir): rm retries those.
      await rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    },
  };
}

/** Whether a URL stays on this machine: loopback addresses, or a page the browser makes itself. */
export function isLocalUrl(url: string): boolean {
  const { protocol, hostname } = new URL(url);
  if (protocol === 'about:' || protocol === 'data:' || protocol === 'blob:') return true;
  return hostname === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(hostname) || hostname === '[::1]';
}

/** A web origin of its own on a loopback address: serves fixed files, 404 for anything else. */
export interface Origin {
  /** e.g. http://127.0.0.2:40123 */
  url: string;
  close(): Promise<void>;
}

export async function serveOrigin(host: string, files: Record<string, { type: string; body: string }>): Promise<Origin> {
  const server = createServer((req, res) => {
    const file = files[new URL(req.url ?? '/', 'http://x').pathname];
    res.writeHead(file ? 200 : 404, { 'content-type': file?.type ?? 'text/plain', 'cache-control': 'no-store' });
    res.end(file?.body ?? 'not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
