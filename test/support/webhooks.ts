import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { RunningProcess } from './processes.js';
import type { TestStack } from './stack.js';

/** What the test stacks' API and webhooks process take: loopback targets allowed (production: none). */
export const ALLOW_LOOPBACK = { OUTBOUND_ALLOW_LOOPBACK: 'true' };

/** The webhooks process of a stack, with a fast retry schedule unless told otherwise. */
export function startWebhooks(stack: TestStack, apiUrl: string, extra: Record<string, string> = {}): Promise<RunningProcess> {
  return stack.start(
    'apps/webhooks/src/main.js',
    { WEBHOOK_PORT: '0', ...ALLOW_LOOPBACK, WEBHOOK_RETRY_SCALE: '0.01', WEBHOOK_POLL_INTERVAL_MS: '200', PUBLIC_URL: apiUrl, ...extra },
    'ready',
  );
}

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  json: any;
  /** Date.now() when the request's body had arrived. */
  at: number;
}

/** What the receiver answers to one request; `hang` never answers, `drop` closes the connection. */
export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang' | 'drop';

/**
 * A webhook receiver on loopback: records every request, answers 200 unless a path has an answer
 * of its own, and can go down and come back on the same port.
 */
export class WebhookReceiver {
  readonly received: Received[] = [];
  private readonly answers = new Map<string, (r: Received, nth: number) => Answer>();
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await receiver.up();
    return receiver;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** How requests to `path` are answered; `nth` counts them from 1. */
  answer(path: string, fn: (r: Received, nth: number) => Answer): void {
    this.answers.set(path, fn);
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async up(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening and cuts open connections: connections to the port are refused. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
    let json: unknown = null;
    try {
      json = JSON.parse(body);
    } catch {
      // kept as text
    }
    const received: Received = { path: (req.url ?? '/').split('?')[0]!, headers, body, json, at: Date.now() };
    this.received.push(received);
    const nth = this.at(received.path).length;
    const answer = this.answers.get(received.path)?.(received, nth) ?? { status: 200 };
    if (answer === 'hang') return;
    if (answer === 'drop') {
      req.socket.destroy();
      return;
    }
    res.writeHead(answer.status, answer.headers ?? {});
    res.end(answer.body ?? '');
  }

  async waitFor(check: (all: Received[]) => boolean, timeoutMs: number, what: string): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!check(this.received)) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; received: ${this.received.map((r) => `${r.path} ${r.json?.type}`).join(', ')}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async close(): Promise<void> {
    await this.down();
  }
}

/** Verifies a received request with the standardwebhooks library; throws when it does not verify. */
export function verifyWebhook(secret: string, r: Received): unknown {
  return new Webhook(secret).verify(r.body, { 'webhook-id': r.headers['webhook-id']!, 'webhook-timestamp': r.headers['webhook-timestamp']!, 'webhook-signature': r.headers['webhook-signature']! });
}
