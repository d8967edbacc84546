import { afterEach, describe, expect, test } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { EngineClient, EngineHttpError, EngineUnavailableError } from './index.js';

// The client's own transport (node:http on kept-alive sockets), against small real servers.
let server: http.Server | null = null;

async function serve(handler: http.RequestListener): Promise<EngineClient> {
  server = http.createServer(handler);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return new EngineClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
}

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = null;
});

describe('engine client transport', () => {
  test('an engine refusing an upload before reading it: the error comes back and the source is released', async () => {
    const client = await serve((req, res) => {
      res.writeHead(413, { 'content-type': 'text/plain', connection: 'close' });
      res.end('too large');
      req.destroy();
    });
    let produced = 0;
    // 1 GiB, produced only as it is read.
    const source = new Readable({
      read() {
        produced += 64 * 1024;
        this.push(produced > 1024 ** 3 ? null : Buffer.alloc(64 * 1024));
      },
    });
    const closed = new Promise((resolve) => source.once('close', resolve));
    const failure = await client.uploadImage(source, 'big.png').catch((err: unknown) => err);
    expect(failure instanceof EngineHttpError || failure instanceof EngineUnavailableError).toBe(true);
    if (failure instanceof EngineHttpError) expect(failure.status).toBe(413);
    await closed;
    expect(produced).toBeLessThan(64 * 1024 ** 2);
  });

  test('a kept-alive socket the engine closed while idle is not an error', async () => {
    let requests = 0;
    const client = await serve((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ queue_running: [], queue_pending: [] }));
      });
    });
    expect(await client.queue()).toEqual({ queue_running: [], queue_pending: [] });
    // The engine drops its idle connections; the client's pooled socket is now dead.
    server!.closeIdleConnections();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await client.queue()).toEqual({ queue_running: [], queue_pending: [] });
    expect(requests).toBe(2);
  });

  test('an engine that stops answering a JSON call times out as unavailable', async () => {
    const client = new EngineClient({ baseUrl: (await serve(() => undefined)).baseUrl, timeoutMs: 200 });
    await expect(client.queue()).rejects.toBeInstanceOf(EngineUnavailableError);
  });

  test('a 4xx answer carries its status and body', async () => {
    const client = await serve((req, res) => {
      req.resume();
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('no such file');
    });
    const failure = await client.view({ filename: 'missing.png' }).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(EngineHttpError);
    expect((failure as EngineHttpError).status).toBe(404);
  });
});
