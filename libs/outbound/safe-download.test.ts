import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { openDownload, OutboundError } from './safe-download.js';

// Only loopback servers: the refused targets are refused before any connection is made.
let server: Server;
let base: string;
let hits = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    if (req.url === '/file') return void res.end('hello');
    if (req.url === '/big') return void res.writeHead(200, { 'content-length': '1000' }).end(Buffer.alloc(1000));
    if (req.url === '/loop') return void res.writeHead(302, { location: '/loop' }).end();
    if (req.url === '/to-link-local') return void res.writeHead(302, { location: 'http://169.254.169.254/' }).end();
    if (req.url === '/to-file') return void res.writeHead(302, { location: '/file' }).end();
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

const open = (url: string, allowLoopback = true, maxBytes = 100) => openDownload(url, { allowLoopback, requireHttps: false }, { maxBytes, signal: AbortSignal.timeout(5000) });
const reason = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof OutboundError ? e.reason : String(e)));

describe('openDownload', () => {
  test('fetches from loopback only when allowed, following a redirect there', async () => {
    const before = hits;
    expect(await reason(open(`${base}/file`, false))).toBe('blocked_address');
    expect(await reason(open(`http://localhost:${new URL(base).port}/file`, false))).toBe('blocked_address');
    expect(hits).toBe(before);
    const download = await open(`${base}/to-file`);
    const chunks: Buffer[] = [];
    for await (const c of download.body) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('hello');
    expect(download.url.pathname).toBe('/file');
  });

  test('refuses private, link-local and metadata targets, redirects to them, redirect loops', async () => {
    for (const url of ['http://10.0.0.1/', 'http://192.168.1.1/', 'http://169.254.169.254/latest/meta-data/', 'http://[fd00::1]/', 'http://0.0.0.0/']) {
      expect([url, await reason(open(url))]).toEqual([url, 'blocked_address']);
    }
    expect(await reason(open(`${base}/to-link-local`))).toBe('blocked_address');
    expect(await reason(open(`${base}/loop`))).toBe('redirects');
  });

  test('refuses other schemes, credentials in the URL, a declared size over the cap, error statuses', async () => {
    expect(await reason(open('file:///etc/passwd'))).toBe('scheme');
    expect(await reason(open('ftp://example.com/x'))).toBe('scheme');
    expect(await reason(open(`http://user:pw@127.0.0.1:${new URL(base).port}/file`))).toBe('scheme');
    expect(await reason(openDownload(`${base}/file`, { allowLoopback: true, requireHttps: true }, { maxBytes: 100, signal: AbortSignal.timeout(5000) }))).toBe('scheme');
    expect(await reason(open(`${base}/big`))).toBe('too_large');
    expect(await reason(open(`${base}/missing`))).toBe('http_status');
  });
});
