import WebSocket from 'ws';
import { call, type Reply } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';
import { encodePng } from '../../apps/api/src/v1/images/png.js';

/** API + worker + sim-engine for one v1 suite. */
export class V1World {
  api!: RunningProcess;
  engine!: RunningProcess;
  worker!: RunningProcess;

  constructor(
    readonly stack = new TestStack('local'),
    private readonly sockets: V1Socket[] = [],
  ) {}

  async start(apiEnv: Record<string, string> = {}): Promise<this> {
    await this.stack.open();
    this.engine = await this.stack.start('apps/sim-engine/src/main.js', { SIM_ENGINE_PORT: '0', SIM_STEP_MS: '20' });
    this.worker = await this.stack.start('apps/worker/src/main.js', { ENGINE_URL: this.engine.url, WORKER_PORT: '0', WORKER_ID: 'w1' }, 'ready');
    this.api = await this.stack.startApi(apiEnv);
    return this;
  }

  /** Another API process on this world's stack and worker (say, another surface); closed with this world. */
  async otherApi(env: Record<string, string>): Promise<V1World> {
    const other = new V1World(this.stack, this.sockets);
    other.api = await this.stack.startApi(env);
    return other;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.close();
    await this.stack.close();
  }

  get url(): string {
    return this.api.url;
  }

  account(opts: { credits?: bigint } = {}) {
    return this.stack.account({ tier: 'pro', ...opts });
  }

  get(key: string | null, path: string): Promise<Reply> {
    return call(`${this.url}${path}`, { headers: key ? { 'x-api-key': key } : {} });
  }

  /** Posts JSON the way browser-based ComfyUI clients do: `text/plain;charset=UTF-8`. */
  post(key: string | null, path: string, body: unknown, contentType: string | null = 'text/plain;charset=UTF-8'): Promise<Reply> {
    const headers: Record<string, string> = key ? { 'x-api-key': key } : {};
    if (contentType) headers['content-type'] = contentType;
    const payload = typeof body === 'string' ? body : JSON.stringify(body);
    // fetch adds text/plain for a string body; a Uint8Array body goes without any content type.
    return call(`${this.url}${path}`, { method: 'POST', headers, body: contentType ? payload : new TextEncoder().encode(payload) });
  }

  upload(key: string | null, bytes: Uint8Array, fileName: string, fields: Record<string, string> = {}, path = '/api/upload/image'): Promise<Reply> {
    const form = new FormData();
    form.append('image', new Blob([bytes]), fileName);
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    return call(`${this.url}${path}`, { method: 'POST', headers: key ? { 'x-api-key': key } : {}, body: form });
  }

  async prompt(key: string | null, prompt: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<string> {
    const reply = await this.post(key, '/api/prompt', { prompt, ...extra });
    if (reply.status !== 200) throw new Error(`prompt refused: ${reply.status} ${reply.text}`);
    return reply.body.prompt_id as string;
  }

  /** `prefix`: the deployment's path prefix, on the deployment surface. */
  async waitStatus(key: string | null, promptId: string, statuses: string[], { timeoutMs = 20_000, prefix = '' } = {}): Promise<string> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.get(key, `${prefix}/api/job/${promptId}/status`);
      if (statuses.includes(r.body?.status)) return r.body.status;
      if (Date.now() > until) throw new Error(`job ${promptId} is ${r.text}, expected ${statuses.join('|')}`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }

  async socket(key: string | null, opts: { clientId?: string; path?: string; via?: 'query' | 'header'; metadata?: boolean } = {}): Promise<V1Socket> {
    const clientId = opts.clientId ?? `c${Math.random().toString(16).slice(2)}`;
    const query = new URLSearchParams({ clientId });
    if (key && opts.via !== 'header') query.set('token', key);
    const ws = new WebSocket(`${this.url.replace('http', 'ws')}${opts.path ?? '/ws'}?${query}`, {
      headers: key && opts.via === 'header' ? { 'x-api-key': key } : {},
    });
    const socket = new V1Socket(ws);
    this.sockets.push(socket);
    await socket.opened;
    if (opts.metadata) {
      ws.send(JSON.stringify({ type: 'feature_flags', data: { supports_preview_metadata: true } }));
      await socket.waitFor((m) => m.type === 'feature_flags');
    }
    await socket.waitFor((m) => m.type === 'status' && m.data?.sid === clientId);
    return socket;
  }

  /** The HTTP status the server answered a WebSocket upgrade with (101 when accepted). */
  upgradeStatus(path: string, headers: Record<string, string> = {}): Promise<number> {
    return upgradeStatusOf(`${this.url.replace('http', 'ws')}${path}`, { headers });
  }
}

export interface Received {
  kind: 'text' | 'binary';
  type?: string;
  data?: any;
  bytes?: Buffer;
}

export class V1Socket {
  readonly messages: Received[] = [];
  readonly opened: Promise<void>;
  private waiters: Array<() => void> = [];

  constructor(readonly ws: WebSocket) {
    this.opened = new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
    });
    ws.on('message', (raw, isBinary) => {
      const buf = Buffer.isBuffer(raw) ? raw : Buffer.concat(raw as Buffer[]);
      if (isBinary) this.messages.push({ kind: 'binary', bytes: buf });
      else {
        const m = JSON.parse(buf.toString('utf8')) as { type: string; data: unknown };
        this.messages.push({ kind: 'text', type: m.type, data: m.data });
      }
      for (const w of this.waiters.splice(0)) w();
    });
  }

  texts(promptId?: string): Received[] {
    return this.messages.filter((m) => m.kind === 'text' && (promptId === undefined || m.data?.prompt_id === promptId));
  }

  binaries(): Buffer[] {
    return this.messages.filter((m) => m.kind === 'binary').map((m) => m.bytes!);
  }

  async waitFor(match: (m: Received) => boolean, timeoutMs = 20_000): Promise<Received> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.find(match);
      if (found) return found;
      const left = until - Date.now();
      if (left <= 0) throw new Error(`no matching message; got ${JSON.stringify(this.messages.filter((m) => m.kind === 'text').map((m) => [m.type, m.data?.node ?? m.data?.status?.exec_info?.queue_remaining]))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves when this prompt has ended: the engine's closing `executing` with no node. */
  ended(promptId: string, timeoutMs?: number): Promise<Received> {
    return this.waitFor((m) => m.type === 'executing' && m.data?.node === null && m.data?.prompt_id === promptId, timeoutMs);
  }

  close(): void {
    this.ws.terminate();
  }
}

/** A small RGB(A) PNG whose pixels are a function of their position. */
export function testPng(width: number, height: number, seed = 1, alpha = false): Buffer {
  const rgba = new Uint8Array(width * height * 4);
  for (let i = 0; i < width * height; i++) {
    rgba[i * 4] = (i * 37 + seed * 11) & 0xff;
    rgba[i * 4 + 1] = (i * 91 + seed * 5) & 0xff;
    rgba[i * 4 + 2] = (i * 13 + seed) & 0xff;
    rgba[i * 4 + 3] = alpha ? (i * 29) & 0xff : 255;
  }
  return encodePng({ width, height, rgba });
}

export function textToImage(steps = 3, size = 64): Record<string, any> {
  return {
    '3': { class_type: 'KSampler', inputs: { seed: 7, steps, cfg: 8, sampler_name: 'euler', scheduler: 'normal', denoise: 1, model: ['4', 0], positive: ['6', 0], negative: ['7', 0], latent_image: ['5', 0] } },
    '4': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'v1-5-pruned-emaonly-fp16.safetensors' } },
    '5': { class_type: 'EmptyLatentImage', inputs: { width: size, height: size, batch_size: 1 } },
    '6': { class_type: 'CLIPTextEncode', inputs: { text: 'a bottle', clip: ['4', 1] } },
    '7': { class_type: 'CLIPTextEncode', inputs: { text: 'text', clip: ['4', 1] } },
    '8': { class_type: 'VAEDecode', inputs: { samples: ['3', 0], vae: ['4', 2] } },
    '9': { class_type: 'SaveImage', inputs: { filename_prefix: 'v1test', images: ['8', 0] } },
  };
}

export function sleeper(ms: number): Record<string, any> {
  return { '1': { class_type: 'SimSleep', inputs: { ms } } };
}

/** The HTTP status a WebSocket upgrade to `url` is answered with (101 when accepted), optionally from a chosen local address. */
export function upgradeStatusOf(url: string, options: { headers?: Record<string, string>; localAddress?: string } = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options);
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      ws.close();
      resolve(101);
    });
    ws.on('error', (err) => {
      if (ws.readyState !== WebSocket.CLOSED) reject(err);
    });
  });
}
