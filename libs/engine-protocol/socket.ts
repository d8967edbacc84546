/**
 * WebSocket connection to the engine (`/ws?clientId=`), with optional
 * feature-flag declaration and automatic reconnect with exponential backoff.
 *
 * Consume either as an EventEmitter ('message', 'binary', 'open', 'close',
 * 'reconnecting', 'error') or with `for await (const ev of socket)`.
 */
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { decodeBinaryFrame, type BinaryFrame } from './frames.js';
import { parseEngineMessage, type EngineMessage, type FeatureFlags } from './messages.js';

export interface EngineSocketOptions {
  /** WebSocket base, e.g. `ws://127.0.0.1:8188` or an http URL (converted). */
  url: string;
  /** Sent as `?clientId=`; default a random hex id. The engine uses it as the socket's sid. */
  clientId?: string;
  /** Declared as the first message on every (re)connect, e.g. `{supports_preview_metadata: true}`. */
  featureFlags?: FeatureFlags;
  /** Default true. */
  reconnect?: boolean;
  /** Backoff: first delay, cap and factor. Defaults 250 ms, 10 s, 2. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  backoffFactor?: number;
  /** Give up after this many failed attempts in a row (default: never). */
  maxAttempts?: number;
  /** Bound of the async-iteration buffer; oldest events are dropped beyond it. Default 10000. */
  maxBufferedEvents?: number;
  headers?: Record<string, string>;
}

export type EngineSocketEvent =
  | { kind: 'message'; message: EngineMessage }
  | { kind: 'binary'; frame: BinaryFrame }
  | { kind: 'open'; sid: string | undefined; reconnect: boolean }
  | { kind: 'close'; code: number; reason: string };

export interface EngineSocketEvents {
  message: [EngineMessage];
  binary: [BinaryFrame];
  open: [{ reconnect: boolean }];
  close: [{ code: number; reason: string; willReconnect: boolean }];
  reconnecting: [{ attempt: number; delayMs: number }];
  error: [Error];
}

export class EngineSocket extends EventEmitter<EngineSocketEvents> {
  readonly clientId: string;
  /** The sid the engine assigned (equals clientId when one was given). */
  sid: string | undefined;
  /** The engine's own feature flags, once it answered our declaration. */
  serverFeatures: FeatureFlags | undefined;

  private ws: WebSocket | undefined;
  private closedByUser = false;
  private attempt = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private readonly opts: Required<Pick<EngineSocketOptions, 'reconnect' | 'initialDelayMs' | 'maxDelayMs' | 'backoffFactor' | 'maxBufferedEvents'>> &
    EngineSocketOptions;
  private readonly buffer: EngineSocketEvent[] = [];
  private waiters: Array<(r: IteratorResult<EngineSocketEvent>) => void> = [];
  private finished = false;
  private connectedOnce = false;

  constructor(options: EngineSocketOptions) {
    super();
    this.opts = {
      reconnect: true,
      initialDelayMs: 250,
      maxDelayMs: 10_000,
      backoffFactor: 2,
      maxBufferedEvents: 10_000,
      ...options,
    };
    this.clientId = options.clientId ?? randomUUID().replace(/-/g, '');
    // An 'error' event without listeners would throw; errors are also surfaced via reconnecting/close.
    this.on('error', () => undefined);
  }

  get url(): string {
    const u = new URL(this.opts.url);
    if (u.protocol === 'http:') u.protocol = 'ws:';
    if (u.protocol === 'https:') u.protocol = 'wss:';
    if (!u.pathname.endsWith('/ws')) u.pathname = u.pathname.replace(/\/+$/, '') + '/ws';
    u.searchParams.set('clientId', this.clientId);
    return u.toString();
  }

  get isOpen(): boolean {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  /** Connect; resolves on the first successful open (retrying per the backoff settings). */
  connect(): Promise<void> {
    this.closedByUser = false;
    return new Promise((resolve, reject) => {
      const onOpen = (): void => {
        cleanup();
        resolve();
      };
      const onClose = (info: { willReconnect: boolean }): void => {
        if (!info.willReconnect) {
          cleanup();
          reject(new Error(`could not connect to ${this.url}`));
        }
      };
      const cleanup = (): void => {
        this.off('open', onOpen);
        this.off('close', onClose);
      };
      this.on('open', onOpen);
      this.on('close', onClose);
      this.open();
    });
  }

  private open(): void {
    const ws = new WebSocket(this.url, { headers: this.opts.headers });
    this.ws = ws;
    ws.on('open', () => {
      this.attempt = 0;
      if (this.opts.featureFlags) {
        ws.send(JSON.stringify({ type: 'feature_flags', data: this.opts.featureFlags }));
      }
      const reconnect = this.connectedOnce;
      this.connectedOnce = true;
      this.push({ kind: 'open', sid: this.sid, reconnect });
      this.emit('open', { reconnect });
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        try {
          const frame = decodeBinaryFrame(data as Buffer | ArrayBuffer | Buffer[]);
          this.push({ kind: 'binary', frame });
          this.emit('binary', frame);
        } catch (err) {
          this.emit('error', err as Error);
        }
        return;
      }
      const text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : Buffer.from(data as ArrayBuffer).toString('utf8');
      const message = parseEngineMessage(text);
      if (!message) return;
      if (message.type === 'status') {
        const sid = (message.data as { sid?: unknown } | undefined)?.sid;
        if (typeof sid === 'string') this.sid = sid;
      } else if (message.type === 'feature_flags') {
        this.serverFeatures = message.data as FeatureFlags;
      }
      this.push({ kind: 'message', message });
      this.emit('message', message);
    });
    ws.on('error', (err) => {
      this.emit('error', err);
    });
    ws.on('close', (code, reasonBuf) => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      const reason = reasonBuf.toString();
      const willReconnect =
        !this.closedByUser &&
        this.opts.reconnect &&
        (this.opts.maxAttempts === undefined || this.attempt < this.opts.maxAttempts);
      this.push({ kind: 'close', code, reason });
      this.emit('close', { code, reason, willReconnect });
      if (willReconnect) this.scheduleReconnect();
      else this.finish();
    });
  }

  private scheduleReconnect(): void {
    const delayMs = Math.min(this.opts.maxDelayMs, this.opts.initialDelayMs * this.opts.backoffFactor ** this.attempt);
    this.attempt += 1;
    this.emit('reconnecting', { attempt: this.attempt, delayMs });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (!this.closedByUser) this.open();
    }, delayMs);
  }

  /** Send a raw JSON message (the engine only acts on `feature_flags` as the first one). */
  send(message: { type: string; data: unknown }): void {
    this.ws?.send(JSON.stringify(message));
  }

  /** Close for good (no reconnect). Resolves once the socket is closed. */
  close(): Promise<void> {
    this.closedByUser = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) {
      this.ws = undefined;
      this.finish();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      ws.once('close', () => resolve());
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close();
    });
  }

  private push(ev: EngineSocketEvent): void {
    const waiter = this.waiters.shift();
    if (waiter) {
      waiter({ value: ev, done: false });
      return;
    }
    this.buffer.push(ev);
    if (this.buffer.length > this.opts.maxBufferedEvents) this.buffer.shift();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    for (const w of this.waiters.splice(0)) w({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<EngineSocketEvent> {
    return {
      next: () => {
        const ev = this.buffer.shift();
        if (ev) return Promise.resolve({ value: ev, done: false });
        if (this.finished) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this.waiters.push(resolve));
      },
      return: async () => {
        await this.close();
        return { value: undefined, done: true };
      },
    };
  }
}
