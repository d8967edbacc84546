import http from 'node:http';
import type { ProviderKeys } from '#libs/config';
import type { AddressInfo } from 'node:net';
import { MediaShelf } from './media.js';
import { bflSim } from './providers/bfl.js';
import { elevenlabsSim } from './providers/elevenlabs.js';
import { googleSim } from './providers/google.js';
import { ideogramSim } from './providers/ideogram.js';
import { klingSim } from './providers/kling.js';
import { lumaSim } from './providers/luma.js';
import { minimaxSim } from './providers/minimax.js';
import { openaiSim } from './providers/openai.js';
import { recraftSim } from './providers/recraft.js';
import { runwaySim } from './providers/runway.js';
import { stabilitySim } from './providers/stability.js';
import { parseForm, readBody, sendJson, sendRaw, type ProviderSim, type SimRequest } from './sim-http.js';
import { steeringOf } from './steering.js';
import { TaskClock } from './tasks.js';

// The partner simulator: every provider of the router's catalog on one loopback port, each under
// `/{provider}` with its native paths, bodies, status codes, poll states and credentials, and the
// result media they hand out by URL under `/media`. See README.md.

export const SIM_PROVIDERS = ['bfl', 'openai', 'stability', 'recraft', 'ideogram', 'kling', 'luma', 'runway', 'minimax', 'google', 'elevenlabs'] as const;
export type SimProvider = (typeof SIM_PROVIDERS)[number];

/** The credentials each simulated provider accepts: the router's own, by the same names. */
export type SimKeys = ProviderKeys;

/** The development keys: what `npm start` and the tests give both the simulator and the router. */
export const DEV_KEYS: SimKeys = {
  bfl: 'sim-bfl-key',
  openai: 'sim-openai-key',
  stability: 'sim-stability-key',
  recraft: 'sim-recraft-key',
  ideogram: 'sim-ideogram-key',
  klingAccessKey: 'sim-kling-access-key',
  klingSecretKey: 'sim-kling-secret-key',
  luma: 'sim-luma-key',
  runway: 'sim-runway-key',
  minimax: 'sim-minimax-key',
  google: 'sim-google-key',
  elevenlabs: 'sim-elevenlabs-key',
};

/** The router's variable for each key (libs/config reads the same names). */
export const ROUTER_KEY_VARIABLES: Record<keyof SimKeys, string> = {
  bfl: 'ROUTER_BFL_API_KEY',
  openai: 'ROUTER_OPENAI_API_KEY',
  stability: 'ROUTER_STABILITY_API_KEY',
  recraft: 'ROUTER_RECRAFT_API_KEY',
  ideogram: 'ROUTER_IDEOGRAM_API_KEY',
  klingAccessKey: 'ROUTER_KLING_ACCESS_KEY',
  klingSecretKey: 'ROUTER_KLING_SECRET_KEY',
  luma: 'ROUTER_LUMA_API_KEY',
  runway: 'ROUTER_RUNWAY_API_KEY',
  minimax: 'ROUTER_MINIMAX_API_KEY',
  google: 'ROUTER_GOOGLE_API_KEY',
  elevenlabs: 'ROUTER_ELEVENLABS_API_KEY',
};

export interface PartnerSimOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  keys?: SimKeys;
  /** Multiplies every provider's default generation time (1: about as long as the real ones take). */
  timeScale?: number;
  /** Hears each status poll that reports a generation's final state, when it leaves (performance.now()). */
  onFinalServed?: (provider: string, taskId: string, at: number) => void;
}

export interface Received {
  provider: string;
  method: string;
  /** Path after `/{provider}`, with its query. */
  path: string;
  body: string;
  headers: http.IncomingHttpHeaders;
  at: number;
  /** What the provider answered, once it has (tests compare it with what the router passed on). */
  answer?: { status: number; body: string };
}

const MAX_BODY = 64 * 1024 * 1024;
const CREDENTIAL_HEADERS = ['authorization', 'x-key', 'api-key', 'xi-api-key', 'x-goog-api-key'];

export class PartnerSim {
  readonly received: Received[] = [];
  readonly media = new MediaShelf();
  readonly tasks = new TaskClock();
  url = '';
  port = 0;
  private server: http.Server | null = null;
  private readonly providers: Map<string, ProviderSim>;
  private readonly inFlight = new Map<string, number>();
  private readonly peaks = new Map<string, number>();
  readonly keys: SimKeys;

  constructor(private readonly options: PartnerSimOptions = {}) {
    const k = (this.keys = options.keys ?? DEV_KEYS);
    const sims = [
      bflSim(k.bfl),
      openaiSim(k.openai),
      stabilitySim(k.stability),
      recraftSim(k.recraft),
      ideogramSim(k.ideogram),
      klingSim(k.klingAccessKey, k.klingSecretKey),
      lumaSim(k.luma),
      runwaySim(k.runway),
      minimaxSim(k.minimax),
      googleSim(k.google),
      elevenlabsSim(k.elevenlabs),
    ];
    this.providers = new Map(sims.map((s) => [s.name, s]));
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      this.route(req, res).catch((err: Error) => {
        if (!res.headersSent) sendJson(res, 500, { error: `partner-sim: ${err.message}` });
        else res.destroy();
      });
    });
    this.server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve) => this.server!.listen(this.options.port ?? 0, this.options.host ?? '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `http://${this.options.host ?? '127.0.0.1'}:${this.port}`;
    return this;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  /** The router's environment for this simulator: every provider's base URL and key. */
  routerEnv(): Record<string, string> {
    const env: Record<string, string> = { ROUTER_UPSTREAM_BASE_URLS: SIM_PROVIDERS.map((p) => `${p}=${this.url}/${p}`).join(',') };
    for (const [name, variable] of Object.entries(ROUTER_KEY_VARIABLES)) env[variable] = this.keys[name as keyof SimKeys];
    return env;
  }

  /** Requests a provider received, oldest first; `method` and a path prefix narrow them. */
  requests(provider: SimProvider, filter: { method?: string; path?: string } = {}): Received[] {
    return this.received.filter((r) => r.provider === provider && (!filter.method || r.method === filter.method) && (!filter.path || r.path.startsWith(filter.path)));
  }

  /** The most requests a provider had in flight at once since the last reset. */
  maxInFlight(provider: SimProvider): number {
    return this.peaks.get(provider) ?? 0;
  }

  resetStats(): void {
    this.received.length = 0;
    this.peaks.clear();
    for (const [p, n] of this.inFlight) this.peaks.set(p, n);
  }

  /** The id of a media URL this simulator handed out. */
  mediaIdOf(url: string): string {
    const m = /\/(?:media|files)\/([0-9a-f-]{36})/.exec(url);
    if (!m) throw new Error(`not a media URL of the simulator: ${url}`);
    return m[1]!;
  }

  private async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim');
    const [, first = '', ...rest] = url.pathname.split('/');
    if (first === 'media' && req.method === 'GET') return this.serveMedia(req, res, rest.join('/'));
    const provider = this.providers.get(first);
    if (!provider) return sendJson(res, 404, { error: `partner-sim serves ${SIM_PROVIDERS.join(', ')} under /{provider}/…` });
    const raw = await readBody(req, MAX_BODY);
    const path = `/${rest.join('/')}`;
    const record: Received = { provider: provider.name, method: req.method ?? '', path: `${path}${url.search}`, body: raw.toString('utf8'), headers: req.headers, at: Date.now() };
    this.received.push(record);
    // Answers are written whole with end() (media are not recorded: they stream from /media).
    const end = res.end.bind(res) as (chunk?: unknown) => http.ServerResponse;
    res.end = ((chunk?: unknown) => {
      if (typeof chunk === 'string' || Buffer.isBuffer(chunk)) record.answer = { status: res.statusCode, body: Buffer.from(chunk).toString('utf8') };
      return end(chunk);
    }) as typeof res.end;
    const n = (this.inFlight.get(provider.name) ?? 0) + 1;
    this.inFlight.set(provider.name, n);
    this.peaks.set(provider.name, Math.max(n, this.peaks.get(provider.name) ?? 0));
    res.once('close', () => this.inFlight.set(provider.name, (this.inFlight.get(provider.name) ?? 1) - 1));
    const simReq = await this.request(provider.name, req, res, path, url.searchParams, raw);
    if (!(await provider.authorized(simReq))) {
      const given = CREDENTIAL_HEADERS.map((h) => req.headers[h]).filter(Boolean).join(' ');
      return provider.refuseCredentials(simReq, given || '(none)');
    }
    await provider.handle(simReq);
  }

  private async request(provider: string, req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams, raw: Buffer): Promise<SimRequest> {
    const type = String(req.headers['content-type'] ?? '');
    let json: unknown;
    if (/json/i.test(type) && raw.length > 0) {
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
    }
    const form = /^multipart\/form-data/i.test(type) ? await parseForm(raw, type) : undefined;
    const steering = steeringOf(form ? Object.fromEntries(form) : json);
    const timeScale = this.options.timeScale ?? 1;
    return {
      provider,
      method: req.method ?? 'GET',
      path,
      query,
      headers: req.headers,
      raw,
      json,
      form,
      steering,
      res,
      origin: this.url,
      media: this.media,
      tasks: this.tasks,
      durationMs: (defaultMs) => (steering.get('slow') ?? Math.round(defaultMs * timeScale)) + Math.random() * (steering.get('spread') ?? 0),
      finalServed: (taskId) => this.options.onFinalServed?.(provider, taskId, performance.now()),
      mediaUrl: (mediaId) => `${this.url}/media/${mediaId}${extensionOf(this.media.get(mediaId)?.contentType)}`,
    };
  }

  /** Result media, as a provider's CDN serves it: 404 unknown (or steered broken), 403 once expired. */
  private serveMedia(req: http.IncomingMessage, res: http.ServerResponse, name: string): void {
    const media = this.media.get(name.replace(/\.[a-z0-9]+$/, ''));
    if (!media || media.broken) return sendRaw(res, 404, 'application/xml', '<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobNotFound</Code><Message>The specified blob does not exist.</Message></Error>');
    if (Date.now() > media.expiresAt) return sendRaw(res, 403, 'application/xml', '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code><Message>Signed expiry time has passed.</Message></Error>');
    if (media.requires && req.headers[media.requires.header] !== media.requires.value) return sendJson(res, 403, { error: { code: 403, message: 'The caller does not have permission', status: 'PERMISSION_DENIED' } });
    this.media.send(res, media);
  }
}

function extensionOf(contentType: string | undefined): string {
  switch (contentType) {
    case 'image/png':
      return '.png';
    case 'image/jpeg':
      return '.jpeg';
    case 'image/webp':
      return '.webp';
    case 'video/mp4':
      return '.mp4';
    default:
      return '';
  }
}

export async function startPartnerSim(options: PartnerSimOptions = {}): Promise<PartnerSim> {
  return new PartnerSim(options).start();
}
