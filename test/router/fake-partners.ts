import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// Fake partner providers, one real HTTP server per partner style, on loopback. What a request does
// is steered by directives written anywhere in its body, e.g. a prompt "a cat [[slow:800]]":
//   slow:N   answer after N ms (submit-then-poll: the generation takes N ms)
//   hang     never answer
//   refuse   refuse on content-policy grounds
//   fail     report the provider's own failure
//   busy     answer 503 (overloaded)
//   garbage  answer 200 with a body that is not JSON
//   html     answer 200 text/html (a gateway's error page)
//   empty    answer 200 with no body
//   gw504    answer 504 (the partner's own gateway timed out)
//   json     answer 200 with a JSON document, whatever the model's own result type
//   denied   answer 401: the partner refuses the router's own credentials (and names them)
//   invalid  (nova) answer 422 with the partner's own validation errors, unknown types included
//   bad422   (nova) answer 422 with a body that is not the validation shape
//   weird    (lumen) report a generation state nobody knows

export interface Received {
  method: string;
  path: string;
  body: string;
  at: number;
}

function directives(body: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const m of body.matchAll(/\[\[([a-z0-9]+)(?::(\d+))?\]\]/g)) found.set(m[1]!, m[2] ? Number(m[2]) : 0);
  return found;
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const TTS_BYTES = Buffer.from([0xff, 0xfb, 0x90, 0x64, 0x00, 0x0f, 0xf0, 0x00, 0x00, 0x69, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00]);

/** Shared bookkeeping: what arrived, and how many requests were in flight at most. */
class FakeServer {
  readonly received: Received[] = [];
  inFlight = 0;
  maxInFlight = 0;
  private server!: http.Server;
  url = '';

  constructor(private readonly handle: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => Promise<void>) {}

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      void (async () => {
        const body = await readBody(req);
        this.received.push({ method: req.method ?? '', path: req.url ?? '', body, at: Date.now() });
        this.inFlight++;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        res.on('close', () => this.inFlight--);
        await this.handle(req, res, body);
      })().catch((err: Error) => {
        if (!res.headersSent) json(res, 599, { error: err.message });
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  posts(pathPrefix: string): Received[] {
    return this.received.filter((r) => r.method === 'POST' && r.path.startsWith(pathPrefix));
  }

  resetStats(): void {
    this.received.length = 0;
    this.maxInFlight = this.inFlight;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Shared answers of the synchronous styles; null when the request should get the normal result. */
async function commonFailure(res: http.ServerResponse, d: Map<string, number>): Promise<boolean> {
  if (d.has('slow')) await sleep(d.get('slow')!);
  if (d.has('hang')) return true; // the response is never written
  if (d.has('fail')) return json(res, 500, { error: { code: 'internal', message: 'GPU worker crashed' } }), true;
  if (d.has('busy')) return json(res, 503, { error: { code: 'overloaded', message: 'Try again later' } }), true;
  if (d.has('gw504')) return json(res, 504, { error: { code: 'timeout', message: 'Upstream inference timed out' } }), true;
  if (d.has('json')) return json(res, 200, { status: 'ok' }), true;
  if (d.has('denied')) return json(res, 401, { error: { code: 'invalid_api_key', message: 'Invalid API key sk-live-PARTNER-SECRET' } }), true;
  if (d.has('garbage')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('<html><body>502 Bad Gateway</body></html>');
    return true;
  }
  if (d.has('html')) {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<html>502 Bad Gateway</html>');
    return true;
  }
  if (d.has('empty')) {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '0' });
    res.end();
    return true;
  }
  return false;
}

/** Synchronous JSON partner: `POST /v1/run/{model}` answers with the finished result. */
export function acmeServer(): FakeServer {
  return new FakeServer(async (req, res, body) => {
    const m = /^\/v1\/run\/([a-z0-9._-]+)$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !m) return json(res, 404, { error: { code: 'not_found', message: 'no such route' } });
    const d = directives(body);
    if (d.has('refuse')) return json(res, 400, { error: { code: 'content_policy_violation', message: 'The prompt was flagged by the safety system.' } });
    if (await commonFailure(res, d)) return;
    if (m[1] === 'tts-mini') {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': TTS_BYTES.length });
      return void res.end(TTS_BYTES);
    }
    // The request bytes are echoed verbatim, so a test sees the body arrived unchanged; the
    // number formatting proves the result comes back unchanged too.
    const text = `{"images":[{"url":"https://cdn.acme.example/${randomUUID()}.png","width":1024,"height":1024}],"timings":{"inference":1.50},"received":${body}}`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
}

interface LumenGeneration {
  id: string;
  model: string;
  readyAt: number;
  ending: 'succeeded' | 'failed' | 'rejected' | 'garbage' | 'weird';
}

/** Submit-then-poll partner: `POST /v2/models/{model}/generations`, `GET .../generations/{id}`. */
export function lumenServer(): FakeServer & { generations: Map<string, LumenGeneration> } {
  const generations = new Map<string, LumenGeneration>();
  const server = new FakeServer(async (req, res, body) => {
    const submit = /^\/v2\/models\/([a-z0-9._-]+)\/generations$/.exec(req.url ?? '');
    const poll = /^\/v2\/models\/([a-z0-9._-]+)\/generations\/([^/]+)$/.exec(req.url ?? '');
    if (req.method === 'POST' && submit) {
      const d = directives(body);
      if (d.has('hang')) return;
      if (d.has('busy')) return json(res, 503, { error: { code: 'overloaded', message: 'Queue full' } });
      const ending = d.has('fail') ? 'failed' : d.has('refuse') ? 'rejected' : d.has('garbage') ? 'garbage' : d.has('weird') ? 'weird' : 'succeeded';
      const g: LumenGeneration = { id: `gen_${randomUUID()}`, model: submit[1]!, readyAt: Date.now() + (d.get('slow') ?? 30), ending };
      generations.set(g.id, g);
      return json(res, 202, { id: g.id, status: 'queued' });
    }
    if (req.method === 'GET' && poll) {
      const g = generations.get(decodeURIComponent(poll[2]!));
      if (!g) return json(res, 404, { error: { code: 'not_found', message: 'unknown generation' } });
      if (Date.now() < g.readyAt) return json(res, 200, { id: g.id, status: 'running' });
      switch (g.ending) {
        case 'succeeded':
          return json(res, 200, { id: g.id, status: 'succeeded', output: { video_url: `https://cdn.lumen.example/${g.id}.mp4`, duration_seconds: 5 } });
        case 'failed':
          return json(res, 200, { id: g.id, status: 'failed', error: { code: 'render_error', message: 'The render farm lost the job' } });
        case 'rejected':
          return json(res, 200, { id: g.id, status: 'rejected', error: { code: 'moderation', message: 'The prompt was flagged' } });
        case 'garbage':
          res.writeHead(200, { 'content-type': 'application/json' });
          return void res.end('{"id": "truncated');
        case 'weird':
          return json(res, 200, { id: g.id, status: 'exploded' });
      }
    }
    return json(res, 404, { error: { code: 'not_found', message: 'no such route' } });
  });
  return Object.assign(server, { generations });
}

export const NOVA_VALIDATION_BODY =
  '{"detail":[{"loc":["body","image_url"],"msg":"Image must be at least 64x64 pixels","type":"image_too_small","ctx":{"min_width":64,"min_height":64},"input":"https://img.example/tiny.png"},' +
  '{"loc":["body","prompt"],"msg":"Prompt language not supported yet","type":"unsupported_language_v9"}]}';

/** Validating partner: `POST /predict/{model}`; answers 422 with its own validation errors. */
export function novaServer(): FakeServer {
  return new FakeServer(async (req, res, body) => {
    const m = /^\/predict\/([a-z0-9._-]+)$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !m) return json(res, 404, { detail: 'Not Found' });
    const d = directives(body);
    if (d.has('invalid')) return json(res, 422, NOVA_VALIDATION_BODY);
    if (d.has('refuse')) return json(res, 422, { detail: [{ loc: ['body', 'prompt'], msg: 'The prompt violates the content policy', type: 'content_policy_violation' }] });
    if (d.has('bad422')) return json(res, 422, { error: 'unprocessable' });
    if (await commonFailure(res, d)) return;
    return json(res, 200, { images: [{ url: `https://cdn.nova.example/${randomUUID()}.png`, width: 512, height: 512 }], model: m[1] });
  });
}

export interface Partners {
  acme: FakeServer;
  lumen: ReturnType<typeof lumenServer>;
  nova: FakeServer;
  /** ROUTER_UPSTREAM_BASE_URLS pointing every partner of the catalog at these servers. */
  upstreamEnv: string;
  stop(): Promise<void>;
}

export async function startPartners(): Promise<Partners> {
  const acme = await acmeServer().start();
  const lumen = lumenServer();
  await lumen.start();
  const nova = await novaServer().start();
  return {
    acme,
    lumen,
    nova,
    upstreamEnv: `acme=${acme.url},lumen=${lumen.url},nova=${nova.url}`,
    async stop() {
      await Promise.all([acme.stop(), lumen.stop(), nova.stop()]);
    },
  };
}
