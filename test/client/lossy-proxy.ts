import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/**
 * An HTTP proxy in front of the API that loses what a test tells it to: the answer to the next
 * matching request (forwarded and acted on, its answer read and thrown away, the client's
 * connection cut: a lost answer), the next event streams after a few frames (a dropped stream),
 * or every event stream (a proxy that will not stream). Everything else passes through.
 */
export class LossyProxy {
  readonly seen: Seen[] = [];
  private server!: http.Server;
  private readonly drops: Array<{ method: string; path: RegExp }> = [];
  private cuts: Array<number> = [];
  refuseStreams = false;
  url = '';

  constructor(private readonly target: string) {}

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The next request of `method` whose path matches reaches the API; its answer never comes back. */
  dropNextAnswer(method: string, path: RegExp): void {
    this.drops.push({ method, path });
  }

  /** The next event stream is cut after `frames` SSE frames (comments included). */
  cutNextStreamAfter(frames: number): void {
    this.cuts.push(frames);
  }

  requests(method: string, path: RegExp): Seen[] {
    return this.seen.filter((s) => s.method === method && path.test(s.url.split('?')[0]!));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.seen.push({ method: req.method!, url: req.url!, headers: req.headers });
    const isStream = req.method === 'GET' && /\/events$/.test(req.url!.split('?')[0]!);
    if (isStream && this.refuseStreams) {
      res.writeHead(502, { 'content-type': 'text/plain' }).end('no streaming here');
      return;
    }
    const dropAt = this.drops.findIndex((d) => d.method === req.method && d.path.test(req.url!.split('?')[0]!));
    const drop = dropAt >= 0 ? this.drops.splice(dropAt, 1)[0] : undefined;
    const cut = isStream ? this.cuts.shift() : undefined;
    const { hostname, port } = new URL(this.target);
    const upstream = http.request({ host: hostname, port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      if (drop) {
        // The API acted on the request and answered; the client never hears it.
        answer.resume();
        answer.on('end', () => res.socket?.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (cut === undefined) {
        answer.pipe(res);
        return;
      }
      let frames = 0;
      answer.on('data', (chunk: Buffer) => {
        frames += chunk.toString().split('\n\n').length - 1;
        if (frames < cut) {
          res.write(chunk);
          return;
        }
        answer.destroy();
        // Cut once the frames so far are on their way: the client gets them, then a broken stream.
        res.write(chunk, () => res.socket?.destroy());
      });
      answer.on('end', () => res.end());
    });
    upstream.on('error', () => res.socket?.destroy());
    req.pipe(upstream);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
