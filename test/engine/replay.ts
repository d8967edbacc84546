/**
 * Replays a recorded engine scenario against a running engine and returns, per WebSocket
 * connection and per HTTP exchange, the recorded and actual traffic normalised for comparison.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import WebSocket from 'ws';
import { buildMultipartBody, decodeBinaryFrame, type BinaryFrame } from '#libs/engine-protocol';

// The recordings are test fixtures of this repository (README there says what they hold).
export const TRANSCRIPTS = fileURLToPath(new URL('../fixtures/engine-transcripts', import.meta.url));

export interface RecordedEvent {
  seq: number;
  direction: 'client->server' | 'server->client';
  kind: 'http' | 'ws-open' | 'ws-text' | 'ws-binary' | 'ws-close';
  conn?: string;
  method?: string;
  path?: string;
  status?: number;
  headers?: Record<string, string>;
  body_encoding?: string;
  body?: unknown;
}

export function loadScenario(name: string): RecordedEvent[] {
  return JSON.parse(readFileSync(path.join(TRANSCRIPTS, `${name}.json`), 'utf8')) as RecordedEvent[];
}

export function scenarioPromptIds(name: string): string[] {
  const index = JSON.parse(readFileSync(path.join(TRANSCRIPTS, 'index.json'), 'utf8')) as { scenarios: Record<string, { prompt_ids: string[] }> };
  return index.scenarios[name]!.prompt_ids;
}

export interface HttpExchange {
  request: RecordedEvent;
  recorded: RecordedEvent;
  actual: { status: number; headers: Record<string, string>; body: unknown; raw: Buffer };
}

export interface ReplayResult {
  /** per connection: recorded server messages and what we received (decoded) */
  ws: Record<string, { recorded: unknown[]; actual: unknown[] }>;
  http: HttpExchange[];
  /** recorded prompt id -> actual prompt id, in order of appearance */
  promptIds: Array<[string, string]>;
}

function decodeRecordedWs(e: RecordedEvent): unknown {
  if (e.kind === 'ws-binary') return { binary: decodeBinaryFrame(Buffer.from(String(e.body), 'base64')) };
  return e.body;
}

function decodeActualWs(data: WebSocket.RawData, isBinary: boolean): unknown {
  const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer);
  if (isBinary) return { binary: decodeBinaryFrame(buf) };
  return JSON.parse(buf.toString('utf8'));
}

async function sendHttp(baseUrl: string, e: RecordedEvent): Promise<HttpExchange['actual']> {
  const url = baseUrl + e.path;
  let body: string | Buffer | undefined;
  const headers: Record<string, string> = {};
  if (e.body_encoding === 'json') {
    body = JSON.stringify(e.body);
    headers['content-type'] = 'application/json';
  } else if (e.body_encoding === 'text') {
    body = String(e.body);
    headers['content-type'] = e.headers?.['content-type'] ?? 'text/plain';
  } else if (e.body_encoding === 'multipart') {
    const parts = e.body as Array<{ name: string; filename?: string; content_type?: string; base64?: string; value?: string }>;
    const mp = buildMultipartBody(
      parts.filter((p) => p.filename === undefined).map((p) => ({ name: p.name, value: String(p.value) })),
      parts
        .filter((p) => p.filename !== undefined)
        .map((p) => ({ name: p.name, filename: p.filename!, contentType: p.content_type ?? 'application/octet-stream', data: Buffer.from(p.base64 ?? '', 'base64') })),
    );
    const chunks: Buffer[] = [];
    for await (const c of mp.stream) chunks.push(Buffer.from(c));
    body = Buffer.concat(chunks);
    headers['content-type'] = mp.contentType;
  }
  const res = await fetch(url, { method: e.method, headers, body } as RequestInit);
  const raw = Buffer.from(await res.arrayBuffer());
  const ct = res.headers.get('content-type') ?? '';
  let parsed: unknown = raw.length === 0 ? null : raw;
  if (ct.startsWith('application/json')) parsed = JSON.parse(raw.toString('utf8'));
  else if (ct.startsWith('text/')) parsed = raw.toString('utf8');
  const h: Record<string, string> = {};
  res.headers.forEach((v, k) => (h[k] = v));
  return { status: res.status, headers: h, body: parsed, raw };
}

/**
 * Before each client event, waits until every connection has received as many server
 * messages as the recording shows before that point, so timing-sensitive steps (an
 * interrupt "while node 3 runs") happen at the recorded moment.
 */
export async function replayScenario(name: string, baseUrl: string, opts: { settleMs?: number; timeoutMs?: number } = {}): Promise<ReplayResult> {
  const events = loadScenario(name);
  const recordedIds = scenarioPromptIds(name);
  const timeoutMs = opts.timeoutMs ?? 8000;
  const sockets = new Map<string, WebSocket>();
  const received = new Map<string, unknown[]>();
  const expected = new Map<string, unknown[]>();
  const http: HttpExchange[] = [];
  const promptIds: Array<[string, string]> = [];
  let waiters: Array<() => void> = [];
  const notify = (): void => {
    const w = waiters;
    waiters = [];
    w.forEach((f) => f());
  };

  const waitFor = async (counts: Map<string, number>): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const missing = [...counts].filter(([conn, n]) => (received.get(conn)?.length ?? 0) < n);
      if (missing.length === 0) return;
      if (Date.now() > deadline) {
        if (process.env.REPLAY_DEBUG) console.log('timeout waiting', JSON.stringify(missing), JSON.stringify([...received].map(([c, m]) => [c, m.length])));
        return; // the comparison will show what is missing
      }
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 50);
      });
    }
  };

  const seenCounts = new Map<string, number>();
  let pendingRequest: RecordedEvent | undefined;
  for (const e of events) {
    if (e.direction === 'server->client') {
      if (e.kind === 'ws-text' || e.kind === 'ws-binary') {
        const conn = e.conn ?? 'ws1';
        seenCounts.set(conn, (seenCounts.get(conn) ?? 0) + 1);
        expected.set(conn, [...(expected.get(conn) ?? []), decodeRecordedWs(e)]);
      }
      continue;
    }
    await waitFor(seenCounts);
    if (process.env.REPLAY_DEBUG) console.log(e.seq, e.kind, e.path, Date.now());
    const conn = e.conn ?? 'ws1';
    if (e.kind === 'ws-open') {
      const wsUrl = baseUrl.replace(/^http/, 'ws') + e.path;
      const ws = new WebSocket(wsUrl);
      received.set(conn, []);
      ws.on('message', (data, isBinary) => {
        received.get(conn)!.push(decodeActualWs(data, isBinary));
        notify();
      });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      sockets.set(conn, ws);
    } else if (e.kind === 'ws-text') {
      sockets.get(conn)!.send(JSON.stringify(e.body));
    } else if (e.kind === 'ws-close') {
      // closing happens at the end, after the comparison window
    } else if (e.kind === 'http') {
      pendingRequest = e;
      const tempNames = pairTempNames(events.filter((x) => x.seq < e.seq && x.direction === 'server->client'), [...received.values()].flat(), http);
      const actual = await sendHttp(baseUrl, substituteIds(e, [...promptIds, ...tempNames]));
      const recorded = events.find((x) => x.seq > e.seq && x.direction === 'server->client' && x.kind === 'http')!;
      http.push({ request: pendingRequest, recorded, actual });
      if (e.path === '/prompt' && e.method === 'POST' && actual.status === 200) {
        const body = actual.body as { prompt_id: string };
        promptIds.push([recordedIds[promptIds.length]!, body.prompt_id]);
      }
    }
  }
  await waitFor(seenCounts);
  await new Promise((r) => setTimeout(r, opts.settleMs ?? 150));
  for (const ws of sockets.values()) ws.close();
  const ws: ReplayResult['ws'] = {};
  for (const [conn, recorded] of expected) ws[conn] = { recorded, actual: received.get(conn) ?? [] };
  return { ws, http, promptIds };
}

const TEMP_NAME = /ComfyUI_temp_[a-z]{5}_/g;

/** Preview file names are random: pair recorded and actual ones by order of first appearance. */
function pairTempNames(recordedServerEvents: RecordedEvent[], actualWs: unknown[], http: HttpExchange[]): Array<[string, string]> {
  const collect = (texts: string[]): string[] => [...new Set(texts.flatMap((t) => t.match(TEMP_NAME) ?? []))];
  const rec = collect(recordedServerEvents.filter((x) => x.kind !== 'ws-binary' && x.body_encoding === 'json').map((x) => JSON.stringify(x.body)));
  const act = collect([...actualWs.map((m) => JSON.stringify(m)), ...http.map((h) => JSON.stringify(h.actual.body))]);
  return rec.map((r, i) => [r, act[i] ?? r] as [string, string]);
}

/** Requests that name a recorded prompt id must name the id our engine gave that prompt. */
function substituteIds(e: RecordedEvent, promptIds: Array<[string, string]>): RecordedEvent {
  let text = JSON.stringify({ path: e.path, body: e.body });
  for (const [rec, act] of promptIds) text = text.split(rec).join(act);
  const { path: p, body } = JSON.parse(text) as { path: string; body: unknown };
  return { ...e, path: p, body };
}

/** Replace values that legitimately differ so recorded and actual compare with toEqual. */
export function normalize(value: unknown, ids: Map<string, string>, key?: string): unknown {
  if (value === null || value === undefined) return value;
  if (typeof value === 'string') {
    if (ids.has(value)) return ids.get(value);
    if (key === 'sid') return '<sid>';
    return value.replace(/ComfyUI_temp_[a-z]{5}_/g, 'ComfyUI_temp_xxxxx_');
  }
  if (typeof value === 'number') {
    if (key === 'timestamp') return '<timestamp>';
    return value;
  }
  if (Array.isArray(value)) {
    const items = value.map((v) => normalize(v, ids));
    // `executed` is a Python set on the engine: its order carries no meaning
    return key === 'executed' ? [...items].sort() : items;
  }
  if (Buffer.isBuffer(value)) return `<bytes:${value.subarray(0, 4).toString('hex')}>`;
  if (typeof value === 'object') {
    if ('binary' in value) return normalizeFrame((value as { binary: BinaryFrame }).binary, ids);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (k === 'exception_message' || k === 'traceback') out[k] = typeof v === 'string' ? '<string>' : Array.isArray(v) ? '<string[]>' : v;
      else out[ids.get(k) ?? k] = normalize(v, ids, k);
    }
    return out;
  }
  return value;
}

function imageMagic(image: Buffer): string {
  if (image.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'png';
  if (image[0] === 0xff && image[1] === 0xd8) return 'jpeg';
  return 'other';
}

function normalizeFrame(f: BinaryFrame, ids: Map<string, string>): unknown {
  switch (f.kind) {
    case 'preview_image':
      return { eventType: f.eventType, imageFormat: f.imageFormat, magic: imageMagic(f.image) };
    case 'preview_image_with_metadata':
      return { eventType: f.eventType, metadata: normalize(f.metadata, ids), metadataKeys: Object.keys(f.metadata), magic: imageMagic(f.image) };
    case 'text':
      return { eventType: f.eventType, nodeId: f.nodeId, text: f.text };
    default:
      return { eventType: f.eventType };
  }
}

export function idMap(result: ReplayResult, extra: Array<[string, string]> = []): { recorded: Map<string, string>; actual: Map<string, string> } {
  const recorded = new Map<string, string>();
  const actual = new Map<string, string>();
  [...result.promptIds, ...extra].forEach(([r, a], i) => {
    recorded.set(r, `<id${i}>`);
    actual.set(a, `<id${i}>`);
  });
  return { recorded, actual };
}
