import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { EngineClient } from '#libs/engine-protocol';
import type { TestStack } from './stack.js';

/**
 * Sits between a worker and its engine and passes everything through, until a test breaks the
 * link: cut the engine WebSocket (and keep it from coming back), leave `/view` unanswered, or hold
 * prompt submissions on their way to the engine.
 * The engine itself runs on undisturbed, so the test controls exactly what the worker misses.
 */
export class EngineProxy {
  private server!: http.Server;
  private readonly sockets = new Set<Duplex>();
  private socketsBlocked = false;
  private viewsStalled = false;
  private readonly stalled = new Set<http.ServerResponse>();
  private promptsHeld = false;
  private readonly heldPrompts: Array<() => void> = [];
  /** `/view` requests that reached the proxy, stalled or not. */
  viewRequests = 0;
  url = '';

  constructor(private readonly engineUrl: string) {}

  async start(): Promise<this> {
    const target = new URL(this.engineUrl);
    this.server = http.createServer((req, res) => {
      if (req.url?.startsWith('/view')) {
        this.viewRequests++;
        if (this.viewsStalled) {
          // Taken, never answered: what an engine too busy to serve a file looks like.
          this.stalled.add(res);
          return;
        }
      }
      if (this.promptsHeld && req.method === 'POST' && req.url?.startsWith('/prompt')) {
        req.pause();
        this.heldPrompts.push(() => forward(req, res));
        return;
      }
      forward(req, res);
    });
    const forward = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const upstream = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    };
    this.server.on('upgrade', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
      if (this.socketsBlocked) {
        client.destroy();
        return;
      }
      const upstream = net.connect(Number(target.port), target.hostname, () => {
        const lines = [`${req.method} ${req.url} HTTP/1.1`, ...Object.entries(req.headers).map(([k, v]) => `${k}: ${String(v)}`)];
        upstream.write(lines.join('\r\n') + '\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client).pipe(upstream);
      });
      const pair = [client, upstream];
      for (const s of pair) {
        this.sockets.add(s);
        s.on('error', () => pair.forEach((x) => x.destroy()));
        s.on('close', () => {
          this.sockets.delete(s);
          pair.forEach((x) => x.destroy());
        });
      }
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as net.AddressInfo;
    this.url = `http://127.0.0.1:${port}`;
    return this;
  }

  /** Drops every open engine WebSocket and refuses new ones until `restoreSockets()`. */
  cutSockets(): void {
    this.socketsBlocked = true;
    for (const s of this.sockets) s.destroy();
  }

  restoreSockets(): void {
    this.socketsBlocked = false;
  }

  get openSockets(): number {
    return this.sockets.size / 2;
  }

  /** From now on `/view` requests are accepted and never answered, until `releaseViews()`. */
  stallViews(): void {
    this.viewsStalled = true;
  }

  /** From now on prompt submissions wait here, not yet on the engine, until `releasePrompts()`. */
  holdPrompts(): void {
    this.promptsHeld = true;
  }

  get heldPromptCount(): number {
    return this.heldPrompts.length;
  }

  /** The held submissions go on to the engine, and later ones pass. */
  releasePrompts(): void {
    this.promptsHeld = false;
    for (const pass of this.heldPrompts.splice(0)) pass();
  }

  /** Later `/view` requests pass again; the ones already stalled are dropped. */
  releaseViews(): void {
    this.viewsStalled = false;
    for (const res of this.stalled) res.destroy();
    this.stalled.clear();
  }

  async close(): Promise<void> {
    this.releaseViews();
    this.releasePrompts();
    for (const s of this.sockets) s.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A sim-engine, and one worker of `stack` that reaches it only through an EngineProxy. `direct`
 * talks to the engine past the proxy, to see what the worker cannot.
 */
export async function startWorkerBehindProxy(stack: TestStack, workerEnv: Record<string, string>): Promise<{ proxy: EngineProxy; direct: EngineClient }> {
  const engine = await stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '10' });
  const proxy = await new EngineProxy(engine.url).start();
  await stack.start('apps/worker/src/main.js', { ENGINE_URL: proxy.url, WORKER_PORT: '0', ...workerEnv }, 'ready');
  return { proxy, direct: new EngineClient(engine.url) };
}
