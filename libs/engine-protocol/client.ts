/**
 * HTTP client for the engine API. Works against a real ComfyUI and the sim-engine.
 * Uploads and downloads are streamed. Requests go over node:http on kept-alive sockets: the
 * worker makes several per job, and fetch (undici) costs about 0.4 ms more for each.
 */
import { parseLosslessJson } from '#libs/contracts';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { EngineHttpError, EngineUnavailableError, EngineValidationError, isPromptErrorBody } from './errors.js';
import { openOutputFile } from './output-file.js';
import type {
  FeaturesResponse,
  HistoryEntry,
  HistoryResponse,
  ObjectInfo,
  PromptQueueInfo,
  QueueResponse,
  SubmitPromptRequest,
  SubmitPromptResponse,
  SystemStats,
  UploadImageResponse,
} from './http-types.js';
import { buildMultipartBody, type MultipartField } from './multipart.js';

export interface EngineClientOptions {
  /** e.g. `http://127.0.0.1:8188` */
  baseUrl: string;
  /** Prefix routes with `/api` (both work on the engine). Default false. */
  apiPrefix?: boolean;
  /** Per-request timeout for JSON calls, ms. Default 30000. Streams are not limited. */
  timeoutMs?: number;
  /**
   * An upload or download that moves no byte for this long fails, ms. Default 60000. Streams
   * have no overall limit (outputs can be large), but an engine that stops sending must not
   * hold a job forever.
   */
  stallTimeoutMs?: number;
  /** Extra headers for every request (e.g. auth on a proxy). */
  headers?: Record<string, string>;
  /**
   * The engine's output folder as this process sees it (a shared volume), or empty: outputs are
   * then read from it rather than through GET /view. It must be this engine's own folder.
   */
  outputDir?: string;
}

export interface UploadImageOptions {
  /** `input` (default), `temp` or `output` */
  type?: 'input' | 'temp' | 'output';
  subfolder?: string;
  /** true: replace a file of the same name; false: the engine renames `a.png` to `a (1).png` */
  overwrite?: boolean;
  contentType?: string;
  /** Upload to `/upload/mask` instead; `originalRef` names the image whose alpha is replaced. */
  mask?: { originalRef: { filename: string; subfolder?: string; type?: string } };
}

export interface ViewRequest {
  filename: string;
  subfolder?: string;
  type?: string;
}

export interface ViewResponse {
  stream: Readable;
  contentType: string | null;
  contentLength: number | null;
  /** The file the bytes come from, when they are read from the engine's folder on this machine. */
  file?: string;
  /** The whole output, when it is small and was read from that folder: `stream` reads these. */
  bytes?: Buffer;
}

type Uploadable = Readable | Buffer | Uint8Array | AsyncIterable<Uint8Array>;

// Idle sockets are dropped after 4 s, well before an engine closes them (ComfyUI after 75 s), so a
// request rarely meets a socket the engine is closing; when it does, it is sent again once.
const agents = {
  'http:': new http.Agent({ keepAlive: true, timeout: 4_000 }),
  'https:': new https.Agent({ keepAlive: true, timeout: 4_000 }),
};

interface SendInit {
  headers?: Record<string, string>;
  body?: string | Readable;
  signal?: AbortSignal;
  /** Fail when the connection is silent this long, response body included. */
  stallTimeoutMs?: number;
}

const isOk = (res: IncomingMessage) => (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300;

/** The whole body of a response as text; rejects if the response breaks off. */
function readText(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (chunk: Buffer) => chunks.push(chunk));
    res.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.once('error', reject);
    res.once('close', () => {
      if (!res.complete) reject(new Error('the response broke off'));
    });
  });
}

export class EngineClient {
  readonly baseUrl: string;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly stallTimeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly outputDir: string;

  constructor(options: EngineClientOptions | string) {
    const opts = typeof options === 'string' ? { baseUrl: options } : options;
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.prefix = opts.apiPrefix ? '/api' : '';
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.stallTimeoutMs = opts.stallTimeoutMs ?? 60_000;
    this.headers = opts.headers ?? {};
    this.outputDir = opts.outputDir ?? '';
  }

  url(path: string): string {
    return this.baseUrl + this.prefix + path;
  }

  /** WebSocket URL for a client id (`/ws?clientId=`). */
  wsUrl(clientId?: string): string {
    const u = new URL(this.url('/ws'));
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    if (clientId) u.searchParams.set('clientId', clientId);
    return u.toString();
  }

  /** One request; resolves once the response headers arrived. Network failures are EngineUnavailableError. */
  private send(method: string, url: string, init: SendInit = {}, retried = false): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const target = new URL(url);
      const protocol = target.protocol === 'https:' ? 'https:' : 'http:';
      const headers: Record<string, string> = { ...this.headers, ...init.headers };
      if (typeof init.body === 'string') headers['content-length'] = String(Buffer.byteLength(init.body));
      else if (init.body === undefined && method !== 'GET') headers['content-length'] = '0';
      const req = (protocol === 'https:' ? https : http).request(target, { method, headers, agent: agents[protocol], signal: init.signal });
      if (init.stallTimeoutMs !== undefined) {
        const ms = init.stallTimeoutMs;
        req.setTimeout(ms, () => req.destroy(new Error(`no data for ${ms} ms`)));
      }
      req.once('response', resolve);
      req.once('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive socket the engine closed while idle: the request never reached it.
        if (!retried && req.reusedSocket && err.code === 'ECONNRESET' && !(init.body instanceof Readable)) {
          this.send(method, url, init, true).then(resolve, reject);
          return;
        }
        reject(new EngineUnavailableError(`${method} ${target.pathname} failed: ${err.message}`, err));
      });
      if (init.body instanceof Readable) {
        const source = init.body;
        source.once('error', (err) => req.destroy(err));
        // An engine that answers (or fails) before taking the whole upload: release the source.
        req.once('close', () => {
          if (!source.readableEnded) source.destroy();
        });
        source.pipe(req);
      } else {
        req.end(init.body);
      }
    });
  }

  private request(method: string, path: string, init: { json?: unknown; signal?: AbortSignal; timeout?: boolean } = {}): Promise<IncomingMessage> {
    const signal = init.signal ?? (init.timeout === false ? undefined : AbortSignal.timeout(this.timeoutMs));
    if (init.json === undefined) return this.send(method, this.url(path), { signal, stallTimeoutMs: init.timeout === false ? this.stallTimeoutMs : undefined });
    return this.send(method, this.url(path), { signal, headers: { 'content-type': 'application/json' }, body: JSON.stringify(init.json) });
  }

  private async json<T>(method: string, path: string, json?: unknown): Promise<T> {
    const res = await this.request(method, path, { json });
    const text = await readText(res);
    if (!isOk(res)) throw new EngineHttpError(method, path, res.statusCode ?? 0, text);
    // The engine writes Python ints whole (a seed's bound is 2^64 - 1): kept so.
    return parseLosslessJson(text) as T;
  }

  private async expectOk(method: string, path: string, json?: unknown): Promise<void> {
    const res = await this.request(method, path, { json });
    const text = await readText(res);
    if (!isOk(res)) throw new EngineHttpError(method, path, res.statusCode ?? 0, text);
  }

  /** Health probe: true when the engine answers `GET /prompt`. Never throws. */
  async ready(timeoutMs = 2000): Promise<boolean> {
    try {
      const res = await this.send('GET', this.url('/prompt'), { signal: AbortSignal.timeout(timeoutMs) });
      await readText(res);
      return isOk(res);
    } catch {
      return false;
    }
  }

  /** Poll `ready()` until it succeeds or `timeoutMs` passes. */
  async waitUntilReady(timeoutMs = 30_000, intervalMs = 200): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await this.ready(Math.min(2000, Math.max(100, deadline - Date.now())))) return;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
    throw new EngineUnavailableError(`engine at ${this.baseUrl} not ready after ${timeoutMs} ms`);
  }

  objectInfo(): Promise<ObjectInfo>;
  objectInfo(nodeClass: string): Promise<ObjectInfo>;
  objectInfo(nodeClass?: string): Promise<ObjectInfo> {
    return this.json('GET', nodeClass ? `/object_info/${encodeURIComponent(nodeClass)}` : '/object_info');
  }

  /** Embedding names (`/embeddings`). */
  embeddings(): Promise<string[]> {
    return this.json('GET', '/embeddings');
  }

  /** Model folder names (`/models`), or one folder's file names (`/models/{folder}`). */
  models(folder?: string): Promise<string[]> {
    return this.json('GET', folder === undefined ? '/models' : `/models/${encodeURIComponent(folder)}`);
  }

  /** Queue a prompt. Throws `EngineValidationError` with the engine's 400 body when refused. */
  async submitPrompt(request: SubmitPromptRequest): Promise<SubmitPromptResponse> {
    const res = await this.request('POST', '/prompt', { json: request });
    const text = await readText(res);
    if (res.statusCode === 400) {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new EngineHttpError('POST', '/prompt', 400, text);
      }
      if (isPromptErrorBody(body)) throw new EngineValidationError(body);
      throw new EngineHttpError('POST', '/prompt', 400, text);
    }
    if (!isOk(res)) throw new EngineHttpError('POST', '/prompt', res.statusCode ?? 0, text);
    return JSON.parse(text) as SubmitPromptResponse;
  }

  /** `GET /prompt`: the number of queued + running prompts. */
  queueInfo(): Promise<PromptQueueInfo> {
    return this.json('GET', '/prompt');
  }

  queue(): Promise<QueueResponse> {
    return this.json('GET', '/queue');
  }

  /** Remove pending prompts. A running prompt is not affected (use `interrupt`). */
  deleteFromQueue(promptIds: string[]): Promise<void> {
    return this.expectOk('POST', '/queue', { delete: promptIds });
  }

  clearQueue(): Promise<void> {
    return this.expectOk('POST', '/queue', { clear: true });
  }

  /** Interrupt the running prompt; with an id, only if that prompt is the one running. */
  async interrupt(promptId?: string): Promise<void> {
    if (promptId === undefined) {
      const res = await this.request('POST', '/interrupt');
      const text = await readText(res);
      if (!isOk(res)) throw new EngineHttpError('POST', '/interrupt', res.statusCode ?? 0, text);
      return;
    }
    return this.expectOk('POST', '/interrupt', { prompt_id: promptId });
  }

  /** History of one prompt, or undefined when the engine has none (`{}`). */
  async history(promptId: string): Promise<HistoryEntry | undefined> {
    const all = await this.json<HistoryResponse>('GET', `/history/${encodeURIComponent(promptId)}`);
    return all[promptId];
  }

  historyAll(maxItems?: number): Promise<HistoryResponse> {
    return this.json('GET', maxItems === undefined ? '/history' : `/history?max_items=${maxItems}`);
  }

  deleteHistory(promptIds: string[]): Promise<void> {
    return this.expectOk('POST', '/history', { delete: promptIds });
  }

  clearHistory(): Promise<void> {
    return this.expectOk('POST', '/history', { clear: true });
  }

  /** Upload a file as multipart (`image` field), streaming the body. */
  async uploadImage(data: Uploadable, filename: string, opts: UploadImageOptions = {}): Promise<UploadImageResponse> {
    const fields: MultipartField[] = [{ name: 'type', value: opts.type ?? 'input' }];
    if (opts.subfolder) fields.push({ name: 'subfolder', value: opts.subfolder });
    if (opts.overwrite !== undefined) fields.push({ name: 'overwrite', value: opts.overwrite ? 'true' : 'false' });
    if (opts.mask) fields.push({ name: 'original_ref', value: JSON.stringify(opts.mask.originalRef) });
    const body = buildMultipartBody(fields, [
      { name: 'image', filename, contentType: opts.contentType ?? guessContentType(filename), data },
    ]);
    const path = opts.mask ? '/upload/mask' : '/upload/image';
    const res = await this.send('POST', this.url(path), { headers: { 'content-type': body.contentType }, body: body.stream, stallTimeoutMs: this.stallTimeoutMs });
    const text = await readText(res);
    if (!isOk(res)) throw new EngineHttpError('POST', path, res.statusCode ?? 0, text);
    return JSON.parse(text) as UploadImageResponse;
  }

  /** Download a file as a Node stream (never buffered whole). Throws `EngineHttpError` on 4xx/5xx. */
  async view(req: ViewRequest, signal?: AbortSignal): Promise<Readable> {
    return (await this.viewWithInfo(req, signal)).stream;
  }

  async viewWithInfo(req: ViewRequest, signal?: AbortSignal): Promise<ViewResponse> {
    const local = this.outputDir ? await openOutputFile(this.outputDir, req) : null;
    // The engine's content type is only a fallback for names that do not tell theirs (contentTypeFor).
    if (local) return { stream: local.stream, contentType: null, contentLength: local.size, file: local.file, ...(local.bytes ? { bytes: local.bytes } : {}) };
    const q = new URLSearchParams({ filename: req.filename, subfolder: req.subfolder ?? '', type: req.type ?? 'output' });
    const path = `/view?${q.toString()}`;
    const res = await this.request('GET', path, { signal, timeout: false });
    if (!isOk(res)) {
      const text = await readText(res).catch(() => '');
      throw new EngineHttpError('GET', path, res.statusCode ?? 0, text);
    }
    const len = res.headers['content-length'];
    return {
      stream: res,
      contentType: res.headers['content-type'] ?? null,
      contentLength: len === undefined ? null : Number(len),
    };
  }

  systemStats(): Promise<SystemStats> {
    return this.json('GET', '/system_stats');
  }

  features(): Promise<FeaturesResponse> {
    return this.json('GET', '/features');
  }

  /** Ask the engine to push `logs` messages to this client id's socket (`PATCH /internal/logs/subscribe`). */
  subscribeLogs(clientId: string, enabled = true): Promise<void> {
    // Internal routes have no /api twin on the engine.
    return this.rawExpectOk('PATCH', '/internal/logs/subscribe', { clientId, enabled });
  }

  /** `GET /internal/logs/raw`: the engine's recent log entries. */
  async logs(): Promise<{ entries: Array<{ t: string; m: string }>; size: { cols: number | null; rows: number | null } }> {
    const res = await this.send('GET', this.baseUrl + '/internal/logs/raw', { signal: AbortSignal.timeout(this.timeoutMs) });
    const text = await readText(res);
    if (!isOk(res)) throw new EngineHttpError('GET', '/internal/logs/raw', res.statusCode ?? 0, text);
    return JSON.parse(text);
  }

  private async rawExpectOk(method: string, path: string, json: unknown): Promise<void> {
    const res = await this.send(method, this.baseUrl + path, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(json),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await readText(res);
    if (!isOk(res)) throw new EngineHttpError(method, path, res.statusCode ?? 0, text);
  }
}

function guessContentType(filename: string): string {
  const ext = filename.toLowerCase().split('.').pop() ?? '';
  const map: Record<string, string> = {
    png: 'image/png',
    jpg: 'image/jpeg',
    jpeg: 'image/jpeg',
    webp: 'image/webp',
    gif: 'image/gif',
    flac: 'audio/flac',
    wav: 'audio/wav',
    mp3: 'audio/mpeg',
    mp4: 'video/mp4',
    webm: 'video/webm',
  };
  return map[ext] ?? 'application/octet-stream';
}
