import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { MediaShelf } from './media.js';
import type { Steering } from './steering.js';
import type { TaskClock } from './tasks.js';

// What a simulated provider sees of a request, and the helpers every provider answers with.

/** A form field as the provider received it: text, or a file part (its bytes are not kept). */
export type FormValue = string | { filename: string; type: string; size: number };

export interface SimRequest {
  provider: string;
  method: string;
  /** The path after `/{provider}`, without the query. */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /** The body parsed as JSON, when it was JSON. */
  json: unknown;
  /** The fields of a multipart/form-data body, when it was one (a repeated field keeps its last value). */
  form: Map<string, FormValue> | undefined;
  steering: Steering;
  res: ServerResponse;
  /** Scheme, host and port of the simulator, as the provider names its own URLs. */
  origin: string;
  media: MediaShelf;
  tasks: TaskClock;
  /** How long a generation of this provider takes: `slow:N` when steered, else its default (scaled). */
  durationMs(defaultMs: number): number;
  /** Tells the simulator a status poll is answering with a generation's final state (the benchmark times it). */
  finalServed(taskId: string): void;
  /** The media's URL at the simulator. */
  mediaUrl(mediaId: string): string;
}

export interface ProviderSim {
  readonly name: string;
  /** Whether the request carries the credentials the provider expects. */
  authorized(req: SimRequest): boolean | Promise<boolean>;
  /** Writes the provider's refusal of the credentials (its own status and body). */
  refuseCredentials(req: SimRequest, given: string): void;
  handle(req: SimRequest): Promise<void>;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendRaw(res: ServerResponse, status: number, contentType: string, body: string | Buffer): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The malformed answers every provider can be steered to give (garbage, html, empty); true when
 * one was written. `garbage` is JSON that stops halfway, as a connection cut by a proxy leaves it.
 */
export function malformed(req: SimRequest): boolean {
  if (req.steering.has('garbage')) {
    sendRaw(req.res, 200, 'application/json', '{"id": "trunc');
    return true;
  }
  if (req.steering.has('html')) {
    sendRaw(req.res, 200, 'text/html', '<html><body><h1>502 Bad Gateway</h1></body></html>');
    return true;
  }
  if (req.steering.has('empty')) {
    sendRaw(req.res, 200, 'application/json', '');
    return true;
  }
  return false;
}

/** The bearer token of an `Authorization: Bearer …` header, or ''. */
export function bearer(headers: IncomingHttpHeaders): string {
  const m = /^Bearer\s+(\S+)$/i.exec(String(headers.authorization ?? ''));
  return m ? m[1]! : '';
}

export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** A multipart/form-data body read the way a provider's framework reads it (the platform's own parser). */
export async function parseForm(raw: Buffer, contentType: string): Promise<Map<string, FormValue> | undefined> {
  try {
    const form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
    const fields = new Map<string, FormValue>();
    for (const [name, value] of form.entries()) {
      fields.set(name, typeof value === 'string' ? value : { filename: value.name, type: value.type, size: value.size });
    }
    return fields;
  } catch {
    return undefined;
  }
}
