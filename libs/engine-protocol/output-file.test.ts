import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { EngineClient } from './index.js';

// Outputs read from the engine's folder when the worker sees it; anything else goes to /view.
let root = '';
let outside = '';
let server: http.Server;
let served: string[] = [];
let client: EngineClient;

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'engine-output-'));
  outside = mkdtempSync(path.join(tmpdir(), 'engine-elsewhere-'));
  mkdirSync(path.join(root, 'output', 'sub', 'dir'), { recursive: true });
  writeFileSync(path.join(root, 'output', 'sub', 'a.png'), 'from the folder');
  writeFileSync(path.join(outside, 'secret.txt'), 'not an output');
  server = http.createServer((req, res) => {
    served.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'image/webp' });
    res.end('from /view');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  client = new EngineClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, outputDir: path.join(root, 'output') });
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(root, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

describe('outputs read from the engine output folder', () => {
  test('an output in the folder is read from the disk, with its size and no type of the engine', async () => {
    served = [];
    const view = await client.viewWithInfo({ filename: 'a.png', subfolder: 'sub', type: 'output' });
    expect(view.contentLength).toBe('from the folder'.length);
    expect(view.contentType).toBeNull();
    expect(await text(view.stream)).toBe('from the folder');
    expect(view.bytes?.toString()).toBe('from the folder');
    expect(served).toEqual([]);
  });

  test('a small output comes whole with its bytes; a large one streams from the open file', async () => {
    const large = Buffer.alloc(1024 * 1024 + 1, 'x');
    writeFileSync(path.join(root, 'output', 'sub', 'large.bin'), large);
    const view = await client.viewWithInfo({ filename: 'large.bin', subfolder: 'sub', type: 'output' });
    expect(view.bytes).toBeUndefined();
    expect(view.file).toBe(path.join(root, 'output', 'sub', 'large.bin'));
    const chunks: Buffer[] = [];
    for await (const chunk of view.stream) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(large)).toBe(true);

    const limit = Buffer.alloc(1024 * 1024, 'y');
    writeFileSync(path.join(root, 'output', 'sub', 'limit.bin'), limit);
    const small = await client.viewWithInfo({ filename: 'limit.bin', subfolder: 'sub', type: 'output' });
    expect(small.bytes?.equals(limit)).toBe(true);
    expect(small.contentLength).toBe(limit.length);
  });

  test.each([
    ['another type', { filename: 'a.png', subfolder: 'sub', type: 'temp' }],
    ['an annotated name', { filename: 'a.png [output]', subfolder: 'sub', type: 'output' }],
    ['a subfolder outside the folder', { filename: 'secret.txt', subfolder: path.relative(path.join(root, 'output'), outside), type: 'output' }],
    ['a file that is not there', { filename: 'missing.png', subfolder: 'sub', type: 'output' }],
    ['a folder, not a file', { filename: 'dir', subfolder: 'sub', type: 'output' }],
  ])('%s goes through the engine /view', async (_label, req) => {
    served = [];
    const view = await client.viewWithInfo(req);
    expect(await text(view.stream)).toBe('from /view');
    expect(view.contentType).toBe('image/webp');
    expect(served).toHaveLength(1);
    expect(served[0]).toMatch(/^\/view\?/);
  });
});
