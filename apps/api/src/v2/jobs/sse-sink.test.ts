import http, { type ServerResponse } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { MAX_BUFFERED_BYTES, PREVIEW_DROP_BYTES } from '../../jobs/slow-readers.js';
import { SseSink } from './sse-sink.js';

// Over a real loopback connection whose client sends its request and then never reads: the
// kernel's buffers fill first, then what the server holds grows, and the sink bounds it.

const PREVIEW = `id: 1-0\nevent: preview\ndata: ${'A'.repeat(64 * 1024)}\n\n`;
const STATUS = 'id: 2-0\nevent: status\ndata: {"status":"running","queue_position":null}\n\n';

describe('SseSink, in front of a client that stops reading', () => {
  let server: http.Server;
  let response: ServerResponse;
  let client: net.Socket;

  beforeEach(async () => {
    const arrived = new Promise<ServerResponse>((resolve) => {
      server = http.createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        resolve(res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    client.on('error', () => undefined);
    client.write('GET /events HTTP/1.1\r\nHost: x\r\n\r\n');
    client.pause();
    response = await arrived;
  });
  afterEach(async () => {
    client.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  /** Writes previews until the sink stops sending them; returns how many went out. */
  function fillWithPreviews(sink: SseSink): number {
    let sent = 0;
    for (let i = 0; i < 10_000; i++) {
      const outcome = sink.write(PREVIEW, true);
      if (outcome !== 'sent') {
        expect(outcome).toBe('dropped');
        return sent;
      }
      sent++;
    }
    throw new Error('previews were never dropped');
  }

  it('drops previews past the first bound, still sends the rest, and closes past the second', () => {
    const sink = new SseSink(response);
    const sent = fillWithPreviews(sink);
    expect(sent).toBeGreaterThan(0);
    // Dropped only once the server itself holds more than the bound (the kernel took its share).
    expect(response.writableLength).toBeGreaterThan(PREVIEW_DROP_BYTES);
    expect(response.writableLength).toBeLessThanOrEqual(PREVIEW_DROP_BYTES + PREVIEW.length);
    expect(sink.write(PREVIEW, true)).toBe('dropped');
    expect(sink.write(STATUS)).toBe('sent');

    // Events that matter are never dropped: they are held up to the hard bound, then the stream is cut.
    let held = 0;
    while (sink.write(PREVIEW) === 'sent') held++;
    expect(held).toBeGreaterThan(0);
    expect(response.writableLength).toBeLessThanOrEqual(MAX_BUFFERED_BYTES + PREVIEW.length);
    expect(response.destroyed).toBe(true);
    expect(sink.write(STATUS)).toBe('closed');
  });

  it('sends everything to a client that reads', async () => {
    client.resume();
    let received = 0;
    client.on('data', (chunk: Buffer) => (received += chunk.length));
    const sink = new SseSink(response);
    for (let i = 0; i < 200; i++) {
      expect(sink.write(PREVIEW, true)).toBe('sent');
      if (response.writableLength > PREVIEW_DROP_BYTES / 2) await new Promise((resolve) => response.once('drain', resolve));
    }
    await new Promise<void>((resolve) => {
      const check = () => (received >= 200 * PREVIEW.length ? resolve() : setTimeout(check, 10));
      check();
    });
  });
});
